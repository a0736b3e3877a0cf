#!/usr/bin/env bash
# Bounded fuzzing run of every target, for CI and for a quick local check.
#
#   fuzz/run-all.sh [SECONDS_PER_TARGET]     (default 20)
#
# Installs cargo-fuzz and the nightly toolchain if missing, builds every
# target once, then runs each for SECONDS_PER_TARGET seconds (one job,
# sequentially). Exits non-zero on the first crash, leak, timeout or build
# failure; the crashing input is left in fuzz/artifacts/<target>/ and the
# command to reproduce it is printed by libFuzzer. The corpus grows in
# fuzz/corpus/<target>/ (git-ignored; CI may cache it).
set -euo pipefail

secs="${1:-20}"
case "$secs" in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS_PER_TARGET]" >&2; exit 2 ;;
esac

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    rustup toolchain install nightly --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

targets=(hexdump decode_cqe decode_wqe decode_mini decode_cq cq_poll zip_session encode_wqe emu_send emu_recv)

cargo +nightly fuzz build
for t in "${targets[@]}"; do
    echo "=== fuzz $t: ${secs}s"
    # A target with checked-in seeds (seeds/<target>/) and a dictionary
    # (dict/<target>.dict) starts from them: text inputs are far from
    # random bytes. The corpus directory is the one cargo-fuzz grows.
    extra=()
    if [ -d "seeds/$t" ]; then
        mkdir -p "corpus/$t"
        extra+=("corpus/$t" "seeds/$t")
    fi
    opts=()
    if [ -f "dict/$t.dict" ]; then
        opts+=("-dict=dict/$t.dict")
    fi
    # -timeout: a single input taking over 10 s is a hang, not slowness.
    # -rss_limit_mb: the targets allocate at most a few hundred KiB per input.
    cargo +nightly fuzz run "$t" "${extra[@]}" -- "${opts[@]}" \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
done
echo "=== all ${#targets[@]} targets ran ${secs}s each without a crash"
