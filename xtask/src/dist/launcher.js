#!/usr/bin/env node
// `handoff` as installed from npm: runs the binary of this platform's package (one of this
// package's optional dependencies) with the same arguments, standard streams and environment,
// forwards the signals a terminal or a supervisor sends, and ends the way the binary ended.
'use strict';

const { spawn } = require('child_process');
const path = require('path');
const os = require('os');

const manifest = require('../package.json');
const platform = `${process.platform}-${process.arch}`;
const wanted = `${manifest.name}-${platform}`;

function fail(message) {
  process.stderr.write(`handoff: ${message}\n`);
  process.exit(1);
}

const supported = Object.keys(manifest.optionalDependencies || {});
if (!supported.includes(wanted)) {
  const names = supported.map((p) => p.slice(manifest.name.length + 1)).join(', ');
  fail(
    `no binary is published for ${platform} (only ${names}); build handoff from source with cargo instead`
  );
}

let binary;
try {
  binary = path.join(path.dirname(require.resolve(`${wanted}/package.json`)), 'bin', 'handoff');
} catch (_) {
  fail(
    `${wanted}@${manifest.version} is not installed; reinstall with optional dependencies: npm install -g ${manifest.name}@${manifest.version} (without --omit=optional)`
  );
}

// Spawned, not exec'd (node cannot): handoff sees its own path as the running executable, so
// the helpers it starts by re-running itself run the real binary.
const child = spawn(binary, process.argv.slice(2), { stdio: 'inherit' });

const forwarded = ['SIGINT', 'SIGTERM', 'SIGHUP'];
for (const signal of forwarded) {
  process.on(signal, () => {
    child.kill(signal);
  });
}

child.on('error', (e) => fail(`cannot run ${binary}: ${e.message}`));

child.on('exit', (code, signal) => {
  if (signal === null) {
    process.exit(code === null ? 1 : code);
  }
  // Ended by a signal: end this process by the same signal, so the caller sees what it saw.
  for (const s of forwarded) {
    process.removeAllListeners(s);
  }
  process.kill(process.pid, signal);
  // A signal whose default action is not to end the process: the shell's convention.
  setTimeout(() => process.exit(128 + (os.constants.signals[signal] || 0)), 200);
});
