//! The platform module is the only place that names an operating system.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_module_but_the_platform_module_names_an_operating_system() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest.parent().unwrap().to_owned();
    let platform = manifest.join("src/platform");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 100, "only {} Rust files found", files.len());
    let needle = ["target", "_os"].concat();
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| !f.starts_with(&platform))
        .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains(&needle)))
        .map(|f| f.strip_prefix(&root).unwrap_or(f).display().to_string())
        .collect();
    assert!(
        offenders.is_empty(),
        "operating systems are named outside handoff-core/src/platform: {offenders:?}"
    );
}
