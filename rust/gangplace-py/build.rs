//! Embeds the git commit the extension is built from (`_gangplace.__build_commit__`, read
//! by the simulator's report provenance; issue 49): `git rev-parse HEAD` of the checkout, or
//! "unknown" when the source is not a git checkout (an archive, an sdist). Only the commit
//! at build time: a checkout changed since the build says so through `git_dirty`.

use std::path::Path;
use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|done| done.status.success())
        .and_then(|done| String::from_utf8(done.stdout).ok())
        .map(|text| text.trim().to_owned())
        .filter(|text| text.len() == 40 && text.chars().all(|c| c.is_ascii_hexdigit()))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=GANGPLACE_BUILD_COMMIT={commit}");
    // Rebuilt when the checkout's HEAD moves (only files that exist: a missing one would
    // make cargo rerun this script on every build).
    let git = Path::new("../../.git");
    let head = git.join("HEAD");
    if head.exists() {
        println!("cargo:rerun-if-changed={}", head.display());
        if let Ok(text) = std::fs::read_to_string(&head)
            && let Some(reference) = text.strip_prefix("ref: ")
        {
            let target = git.join(reference.trim());
            if target.exists() {
                println!("cargo:rerun-if-changed={}", target.display());
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
