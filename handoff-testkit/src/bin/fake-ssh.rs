//! `fake-ssh`: stands in for the `ssh` client, running the remote command as a login on the
//! host its `-F` configuration names; see `handoff_testkit::fake_ssh`.

fn main() -> std::process::ExitCode {
    handoff_testkit::fake_ssh::client_main()
}
