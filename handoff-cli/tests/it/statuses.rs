//! Every status and exit code, on both adapters.
