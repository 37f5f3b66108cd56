//! Build check of the `video` feature: FFmpeg's development libraries must be found (through
//! pkg-config, or `FFMPEG_DIR`), else the build stops and says what to install and how to build
//! without video. It runs before FFmpeg's bindings are generated, so this is the first error.

use std::{env, process::Command};

/// The FFmpeg libraries the `av` and `media` modules link (through ffmpeg-next's `format`,
/// `codec` and `software-scaling` features).
const LIBS: &[&str] = &["libavformat", "libavcodec", "libavutil", "libswscale"];

#[expect(clippy::print_stderr, reason = "a build script tells cargo's user through stderr")]
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for var in ["FFMPEG_DIR", "PKG_CONFIG", "PKG_CONFIG_PATH", "FFMPEG_PKG_CONFIG_PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    if env::var_os("CARGO_FEATURE_VIDEO").is_none() || env::var_os("FFMPEG_DIR").is_some() {
        return;
    }
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_owned());
    let missing: Vec<&str> = match Command::new(&pkg_config).arg("--version").output() {
        Ok(out) if out.status.success() => LIBS
            .iter()
            .copied()
            .filter(|lib| {
                !Command::new(&pkg_config)
                    .args(["--exists", lib])
                    .status()
                    .is_ok_and(|s| s.success())
            })
            .collect(),
        _ => vec!["pkg-config (the program)"],
    };
    if missing.is_empty() {
        return;
    }
    println!(
        "cargo:warning=the `video` feature needs FFmpeg's development libraries; missing: {}",
        missing.join(", ")
    );
    eprintln!(
        "\nenergon-reader's `video` feature (on by default in the `energon` command and the \
         energon_rs wheel: video and audio decoding, video metadata) needs FFmpeg's development \
         libraries, found through pkg-config. Missing: {}.\n\n\
         Install them:\n  \
         Debian/Ubuntu: apt-get install pkg-config libavformat-dev libavcodec-dev libavutil-dev \
         libswscale-dev libclang-dev\n  \
         Fedora: dnf install pkgconf ffmpeg-free-devel clang-devel\n  \
         macOS: brew install ffmpeg pkg-config llvm\n\
         (or set FFMPEG_DIR to an FFmpeg build), or build without video:\n  \
         cargo build --release -p energon-cli --no-default-features\n  \
         maturin build --release -m crates/energon-py/Cargo.toml --no-default-features\n",
        missing.join(", ")
    );
    std::process::exit(1);
}
