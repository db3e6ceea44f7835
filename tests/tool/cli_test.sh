#!/usr/bin/env bash
# The `switchyard` tool end to end: exit statuses (0 success, 1 a failed check,
# 2 bad usage or input) and the round trip embedded model -> quantize -> run.
# Usage: cli_test.sh PATH/TO/switchyard   (ctest passes the built tool)
set -uo pipefail
tool=${1:?usage: cli_test.sh PATH/TO/switchyard}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

source "$(dirname "$0")/expect.sh"

export SWITCHYARD_THREADS=2

expect 0 "help" -- "$tool" --help
expect 2 "unknown command" -- "$tool" no-such-command
expect 2 "unknown option" -- "$tool" run --no-such-option

# run: the embedded model, saved as f32 for the quantize round trip below.
expect 0 "run the embedded model (f32) and keep its file" -- \
  "$tool" run --model-type f32 --save-model "$work/tiny-f32.gguf" --prompt-tokens 8 --tokens 4
contains out "tokens/s" "run prints throughput"
expect 0 "run --json" -- "$tool" run --prompt-tokens 4 --tokens 2 --json
if command -v python3 >/dev/null && ! python3 -m json.tool "$work/out" >/dev/null 2>&1; then
  echo "FAIL: run --json does not print JSON"
  failures=$((failures + 1))
fi
expect 2 "run a missing file" -- "$tool" run "$work/missing.gguf"
expect 2 "run --tokens -1" -- "$tool" run --tokens -1
# Every numeric flag is range-checked at parse time: a usage error naming the flag.
expect 2 "run --threads 100000" -- "$tool" run --threads 100000
contains err "threads" "the refusal names the flag"
expect 2 "run --tokens beyond any context" -- "$tool" run --tokens 99999999999999999999
expect 2 "run --prompt-tokens 0" -- "$tool" run --prompt-tokens 0
# Split over simulated devices: the same greedy tokens as the whole f32 model.
expect 0 "run the f32 model whole" -- "$tool" run --model-type f32 --prompt-tokens 8 --tokens 6
grep "^tokens" "$work/out" >"$work/tokens-whole"
expect 0 "run --devices 2" -- "$tool" run --model-type f32 --prompt-tokens 8 --tokens 6 --devices 2
contains out "split over 2 devices (simulated ranks)" "run says it split the model"
contains out "collective" "the collectives' time is its own op family"
grep "^tokens" "$work/out" >"$work/tokens-split"
if ! cmp -s "$work/tokens-whole" "$work/tokens-split"; then
  echo "FAIL: the split model generates other tokens than the whole one"
  failures=$((failures + 1))
fi
expect 2 "run --devices 3 (4 kv heads)" -- "$tool" run --devices 3
contains err "do not split evenly over 3 devices" "the refusal says why"
expect 2 "run --devices 0" -- "$tool" run --devices 0
# Sampling: the same seed gives the same tokens, the options are checked.
expect 0 "run --temperature with a seed" -- \
  "$tool" run --prompt-tokens 4 --tokens 12 --temperature 0.9 --seed 11
contains out "sampling temperature 0.9" "run names its sampling"
grep "^tokens" "$work/out" >"$work/tokens-a"
expect 0 "run again with the same seed" -- \
  "$tool" run --prompt-tokens 4 --tokens 12 --temperature 0.9 --seed 11
grep "^tokens" "$work/out" >"$work/tokens-b"
if ! cmp -s "$work/tokens-a" "$work/tokens-b"; then
  echo "FAIL: the same seed gave different tokens"
  failures=$((failures + 1))
fi
# --logits-out: an .npy of the rows each token was chosen from; greedy picks each
# row's largest logit (checked without numpy: the format is a header and f32s).
expect 0 "run --logits-out" -- "$tool" run --prompt-tokens 4 --tokens 5 --logits-out "$work/l.npy"
if command -v python3 >/dev/null; then
  if ! python3 - "$work/l.npy" "$(grep '^tokens' "$work/out")" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x93NUMPY\x01\x00", data[:8]
n = struct.unpack("<H", data[8:10])[0]
header = data[10:10 + n].decode()
assert (10 + n) % 64 == 0 and "'descr': '<f4'" in header, header
rows, cols = eval(header)["shape"]
values = struct.unpack("<%df" % (rows * cols), data[10 + n:])
picked = [max(range(cols), key=lambda j: values[r * cols + j]) for r in range(rows)]
tokens = [int(t) for t in sys.argv[2].split()[1:]]
assert picked == tokens, (picked, tokens)
PY
  then
    echo "FAIL: --logits-out rows do not give the greedy tokens"
    failures=$((failures + 1))
  fi
fi
expect 2 "run --logits-out to a missing directory" -- \
  "$tool" run --prompt-tokens 4 --tokens 2 --logits-out "$work/missing/l.npy"
contains err "cannot write" "the refusal names the path"
# --stop-token: generation ends after the first chosen token it names.
expect 0 "run greedy" -- "$tool" run --prompt-tokens 4 --tokens 6
third=$(grep '^tokens' "$work/out" | awk '{print $4}')
expect 0 "run --stop-token at the third token" -- \
  "$tool" run --prompt-tokens 4 --tokens 6 --stop-token "$third"
contains out "stopped  at token $third" "run says where it stopped"
if [[ $(grep '^tokens' "$work/out" | awk '{print NF - 1}') -gt 3 ]]; then
  echo "FAIL: --stop-token $third did not stop generation"
  failures=$((failures + 1))
fi
# Text in and out: the embedded model has a tokenizer; --prompt streams the prompt
# and what follows it, --prompt-file reads the same text from a file.
expect 0 "run --prompt" -- "$tool" run --prompt "The model writes" --tokens 8
if [[ $(head -c 16 "$work/out") != "The model writes" ]]; then
  echo "FAIL: run --prompt does not print the prompt before the generated text"
  failures=$((failures + 1))
fi
contains out "text in  gpt2 (llama-bpe): 16 bytes encoded" "run reports the text path's cost"
head -1 "$work/out" >"$work/streamed"
printf 'The model writes' >"$work/prompt.txt"
expect 0 "run --prompt-file" -- "$tool" run --prompt-file "$work/prompt.txt" --tokens 8
if ! head -1 "$work/out" | cmp -s - "$work/streamed"; then
  echo "FAIL: --prompt-file and --prompt with the same text generate different text"
  failures=$((failures + 1))
fi
expect 0 "run --prompt --json" -- "$tool" run --prompt "The model writes" --tokens 8 --json
contains out '"text":' "run --json has the generated text"
expect 0 "run without a prompt decodes its continuation" -- "$tool" run --tokens 4
contains out "^text     \"" "run prints the generated text"
expect 2 "run --prompt with --prompt-tokens" -- "$tool" run --prompt hi --prompt-tokens 4
expect 2 "run --prompt-file that does not exist" -- "$tool" run --prompt-file "$work/none.txt"
contains err "cannot read" "the refusal names the file"
# perplexity: chunked scoring of a text file, its logits as .npy.
head -c 20000 "$(dirname "$0")/../data/text/heldout.txt" >"$work/text.txt"
expect 0 "perplexity" -- "$tool" perplexity --file "$work/text.txt" --ctx 64 --chunks 3 \
  --logits-out "$work/ppl.npy"
contains out "^perplexity [0-9.]* +/- [0-9.]* over 3 chunks of 64 tokens (93 scored)" \
  "perplexity reports its value, error and chunks"
# 3 chunks x 31 scored rows x 512 logits x 4 bytes, after the 128-byte header.
if [[ $(stat -c %s "$work/ppl.npy") -ne $((128 + 93 * 512 * 4)) ]]; then
  echo "FAIL: perplexity --logits-out wrote $(stat -c %s "$work/ppl.npy") bytes"
  failures=$((failures + 1))
fi
expect 0 "perplexity --json" -- "$tool" perplexity --file "$work/text.txt" --ctx 64 --chunks 2 --json
contains out '"perplexity":' "perplexity --json"
expect 2 "perplexity without --file" -- "$tool" perplexity
expect 2 "perplexity --file that does not exist" -- "$tool" perplexity --file "$work/none.txt"
expect 2 "perplexity --ctx 3" -- "$tool" perplexity --file "$work/text.txt" --ctx 3
expect 2 "perplexity --batch above --ctx" -- "$tool" perplexity --file "$work/text.txt" --ctx 64 --batch 65
expect 2 "perplexity --ctx above the model's context" -- "$tool" perplexity --file "$work/text.txt" --ctx 4096
printf 'too short' >"$work/short.txt"
expect 2 "perplexity on less than one chunk" -- "$tool" perplexity --file "$work/short.txt" --ctx 64
contains err "fewer than one chunk of 64" "the refusal names the counts"
expect 2 "run --stop-token outside the vocabulary" -- "$tool" run --stop-token 999999
contains err "outside the" "the refusal names the vocabulary"
expect 2 "run --top-p 2" -- "$tool" run --temperature 1 --top-p 2
contains err "top-p must be in" "run names the bad sampling option"
expect 2 "run --temperature -1" -- "$tool" run --temperature -1
expect 2 "explain --max-tokens 0" -- "$tool" explain --max-tokens 0
expect 2 "verify --threads 0" -- "$tool" verify --threads 0 --no-record
expect 2 "quantize --threads -1" -- "$tool" quantize a b --type q8_0 --threads -1
# Output that cannot be written is a failure, in one line, not a silent success.
if [[ -w /dev/full ]]; then
  "$tool" coverage >/dev/full 2>"$work/err"
  got=$?
  if [[ $got -ne 1 || $(wc -l <"$work/err") -ne 1 ]] || ! grep -q "cannot write the output" "$work/err"; then
    echo "FAIL: coverage to a full disk: exit $got, stderr:"
    sed 's/^/  /' "$work/err" | head -5
    failures=$((failures + 1))
  else
    echo "ok: coverage to a full disk (exit 1, one line)"
  fi
fi
expect 2 "run --model-type with a model file" -- \
  "$tool" run "$work/tiny-f32.gguf" --model-type q4_k
expect 2 "run --model-type nonsense" -- "$tool" run --model-type q9_z
# The environment: a misspelt name or an unusable value is a usage error at start-up
# (exit 2) naming it; strict mode is never turned off by a typo.
SWITCHYARD_STRICT_KERNELS=ture expect 2 "strict policy typo" -- "$tool" coverage
contains err "SWITCHYARD_STRICT_KERNELS: strict policy: 'ture'" "the typo is named"
SWITCHYARD_STRICT_KERNEL=1 expect 2 "misspelt variable name" -- "$tool" coverage
contains err "SWITCHYARD_STRICT_KERNEL is not a Switchyard variable" "the name is refused"
SWITCHYARD_CPU_DISABLE=avx3 expect 2 "unknown CPU feature" -- "$tool" coverage
contains err "unknown CPU feature 'avx3'" "the feature is named"
SWITCHYARD_THREADS=lots expect 2 "thread count that is not a number" -- "$tool" coverage
SWITCHYARD_THREADS=0 expect 2 "thread count 0" -- "$tool" coverage
SWITCHYARD_KERNEL_REGISTRY=maybe expect 2 "registry switch" -- "$tool" coverage
SWITCHYARD_MASK_KERNELS='cpu:matmul' expect 2 "malformed mask" -- "$tool" coverage
contains err "expected backend:op:dtype" "the mask error says the form"
SWITCHYARD_STRICT_KERNELS=$'matmul\n\e[31m' expect 2 "control bytes in a variable" -- "$tool" coverage
if [[ $(wc -l <"$work/err") -ne 1 ]]; then
  echo "FAIL: an environment error spans $(wc -l <"$work/err") lines"
  failures=$((failures + 1))
fi
SWITCHYARD_STRICT_KERNELS='matmul,role:attn_v' expect 0 "strict list with a role" -- "$tool" coverage

# --backend parses against the compiled backends and names them when it refuses.
expect 2 "run --backend unknown" -- "$tool" run --backend tpu
contains err "unknown backend 'tpu' (compiled: cpu" "the refusal lists the compiled backends"
expect 2 "run --backend known but not compiled" -- "$tool" run --backend metal
contains err "'metal' is not compiled into this build" "the refusal says it is not compiled"
# cuda: without a GPU (CI) a usage error either way, saying why: not compiled in, or
# compiled in with no device or driver; with one, the embedded model runs there.
if nvidia-smi -L >/dev/null 2>&1; then
  expect 0 "run --backend cuda on a GPU" -- "$tool" run --backend cuda --prompt-tokens 4 --tokens 2
else
  expect 2 "run --backend cuda without a GPU" -- "$tool" run --backend cuda --tokens 1
  contains err "cuda" "the refusal names the backend"
fi
expect 0 "run --backend auto" -- "$tool" run --backend auto --prompt-tokens 4 --tokens 2
printf 'GGUF\003\000\000\000' >"$work/truncated.gguf"
expect 2 "run a truncated file" -- "$tool" run "$work/truncated.gguf"
contains err "truncated.gguf\|truncated\|ends" "the error names the problem"
# The q4_k matmuls hidden: the load reports the fallback; strict mode refuses (exit 1).
SWITCHYARD_MASK_KERNELS='cpu:matmul:q4_k' expect 0 "run with a masked kernel" -- \
  "$tool" run --prompt-tokens 4 --tokens 2
contains out "VIOLATION blk.0.attn_q.weight" "the kernel report names the weight"
SWITCHYARD_MASK_KERNELS='cpu:matmul:q4_k' expect 1 "strict run with a masked kernel" -- \
  "$tool" run --strict --prompt-tokens 4 --tokens 2
contains err "strict" "the refusal says why"
# A q8_0 KV cache runs; without a kernel that reads one, the load names the
# attention and refuses (it has no fallback).
expect 0 "run with a q8_0 KV cache" -- "$tool" run --cache-type q8_0 --prompt-tokens 8 --tokens 4
expect 2 "run with an unknown cache type" -- "$tool" run --cache-type q4_0
SWITCHYARD_MASK_KERNELS='cpu:attention:q8_0' expect 2 "a q8_0 cache with its attention masked" -- \
  "$tool" run --cache-type q8_0 --prompt-tokens 4 --tokens 2
contains err "no kernel for attention(f32,q8_0,q8_0" "the refusal names the missing kernel"

# inspect
expect 0 "inspect" -- "$tool" inspect "$work/tiny-f32.gguf"
contains out "blk.0.attn_q.weight" "inspect lists tensors"
expect 2 "inspect a missing file" -- "$tool" inspect "$work/missing.gguf"
expect 2 "inspect a truncated file" -- "$tool" inspect "$work/truncated.gguf"

# inspect --check and run --check-weights: garbage written into well-formed files at
# known places must be found there, named, and fail the check (exit 1).
# data_at FILE TENSOR: the file offset of a tensor's first byte (from inspect).
data_at() {
  local data offset
  data=$("$tool" inspect "$1" | sed -n 's/.*data at offset \([0-9]*\),.*/\1/p')
  offset=$("$tool" inspect "$1" | awk -v n="$2" '$1 == n { print $(NF - 1) }')
  echo $((data + offset))
}
# poke FILE OFFSET BYTES: overwrite bytes in place (BYTES as printf escapes).
poke() { printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
# one_line: the last command's stderr is exactly one line.
one_line() {
  if [[ $(wc -l <"$work/err") -ne 1 ]]; then
    echo "FAIL: $1: stderr has $(wc -l <"$work/err") lines"
    sed 's/^/  stderr: /' "$work/err" | head -5
    failures=$((failures + 1))
  fi
}
expect 0 "inspect --check a clean f32 model" -- "$tool" inspect "$work/tiny-f32.gguf" --check
contains out "checked 39 of 39 tensors" "the check covers every tensor"
contains out "no NaN or infinity" "the summary says it is clean"
[[ ! -s "$work/err" ]] || { echo "FAIL: a clean check wrote to stderr (no progress bar off a terminal)"; failures=$((failures + 1)); }
cp "$work/tiny-f32.gguf" "$work/nan-f32.gguf"
poke "$work/nan-f32.gguf" $(($(data_at "$work/nan-f32.gguf" blk.0.attn_q.weight) + 4 * 3)) '\x00\x00\xc0\x7f'
expect 1 "inspect --check a NaN f32 weight" -- "$tool" inspect "$work/nan-f32.gguf" --check
contains out "^NONFINITE  blk.0.attn_q.weight  f32: 1 NaN, 0 Inf, 0 subnormal of 65536 values; first non-finite at element 3$" \
  "the tensor, the counts and the element"
contains out "1 tensor holds NaN or infinity (1 NaN, 0 Inf)" "the summary counts it"
contains err "holds NaN or infinity: 'blk.0.attn_q.weight'" "the refusal names the tensor"
one_line "inspect --check refusal"
expect 1 "inspect --check --json a NaN f32 weight" -- "$tool" inspect "$work/nan-f32.gguf" --check --json
if command -v python3 >/dev/null; then
  python3 - "$work/out" <<'PY' || { echo "FAIL: inspect --check --json"; failures=$((failures + 1)); }
import json, sys
c = json.load(open(sys.argv[1]))["check"]
assert c["ok"] is False and c["nan"] == 1 and c["inf"] == 0, c
f = c["findings"]
assert len(f) == 1 and f[0]["name"] == "blk.0.attn_q.weight" and f[0]["first_nonfinite"] == 3, f
assert f[0]["index_unit"] == "element" and f[0]["dtype"] == "f32", f
PY
fi
expect 1 "run --check-weights refuses a NaN weight" -- \
  "$tool" run "$work/nan-f32.gguf" --check-weights --prompt-tokens 2 --tokens 1
contains err "run: the model's weights hold NaN or infinity: 'blk.0.attn_q.weight' (f32: 1 NaN" \
  "the refusal names the tensor"
one_line "run --check-weights refusal"
expect 1 "run checks the weights by default" -- \
  "$tool" run "$work/nan-f32.gguf" --prompt-tokens 2 --tokens 1
contains err "'blk.0.attn_q.weight'" "the default refusal names the tensor"
# --no-check-weights skips the scan (what the NaN does then is the run's business:
# finite logits, or a refusal of non-finite ones, but not the weight check's).
"$tool" run "$work/nan-f32.gguf" --no-check-weights --prompt-tokens 2 --tokens 1 >"$work/out" 2>"$work/err"
if grep -q "weights hold NaN" "$work/err"; then
  echo "FAIL: run --no-check-weights still checked the weights"
  failures=$((failures + 1))
else
  echo "ok: run --no-check-weights skips the scan"
fi
expect 0 "run --check-weights a clean model" -- \
  "$tool" run "$work/tiny-f32.gguf" --check-weights --prompt-tokens 2 --tokens 1
contains out "^weights  checked 39 of 39 tensors" "run prints the check's summary"
cp "$work/tiny-f32.gguf" "$work/sub-f32.gguf"
at=$(data_at "$work/sub-f32.gguf" blk.1.ffn_up.weight)
poke "$work/sub-f32.gguf" $((at + 4 * 10)) '\x01\x00\x00\x00'
poke "$work/sub-f32.gguf" $((at + 4 * 11)) '\xff\xff\x7f\x80'
expect 0 "inspect --check f32 subnormals (a warning)" -- "$tool" inspect "$work/sub-f32.gguf" --check
contains out "^SUBNORMAL  blk.1.ffn_up.weight  f32: 0 NaN, 0 Inf, 2 subnormal of 196608 values; first subnormal at element 10$" \
  "the subnormal tensor and its first element"
contains out "2 subnormal values in 1 tensor stay subnormal in f32 (a warning)" "the summary warns"
expect 0 "quantize to f16" -- "$tool" quantize "$work/tiny-f32.gguf" "$work/inf-f16.gguf" --type f16
poke "$work/inf-f16.gguf" $(($(data_at "$work/inf-f16.gguf" blk.1.ffn_gate.weight) + 2 * 5)) '\x00\xfc'
expect 1 "inspect --check an infinite f16 value" -- "$tool" inspect "$work/inf-f16.gguf" --check
contains out "^NONFINITE  blk.1.ffn_gate.weight  f16: 0 NaN, 1 Inf, [0-9]* subnormal of 196608 values; first non-finite at element 5;" \
  "the f16 tensor and element"
expect 0 "quantize to q8_0" -- "$tool" quantize "$work/tiny-f32.gguf" "$work/nan-q8.gguf" --type q8_0
poke "$work/nan-q8.gguf" $(($(data_at "$work/nan-q8.gguf" blk.0.attn_v.weight) + 34 * 5)) '\x00\x7e'
expect 1 "inspect --check a NaN q8_0 scale" -- "$tool" inspect "$work/nan-q8.gguf" --check
contains out "^NONFINITE  blk.0.attn_v.weight  q8_0: 1 NaN, 0 Inf, 0 subnormal of 1024 scales; first non-finite at block 5 (d)$" \
  "the q8_0 block and field"
expect 1 "run --check-weights a NaN q8_0 scale" -- \
  "$tool" run "$work/nan-q8.gguf" --check-weights --prompt-tokens 2 --tokens 1
contains err "'blk.0.attn_v.weight' (q8_0" "the refusal names the q8_0 tensor"

# quantize: f32 -> q4_k_m, then run the result.
expect 0 "quantize to q4_k_m" -- \
  "$tool" quantize "$work/tiny-f32.gguf" "$work/tiny-q4km.gguf" --type q4_k_m
expect 0 "inspect the quantized model" -- "$tool" inspect "$work/tiny-q4km.gguf"
contains out "q4_k" "the quantized model holds q4_k tensors"
contains out "q6_k" "the q4_k_m mix keeps some tensors in q6_k"
expect 0 "run the quantized model" -- "$tool" run "$work/tiny-q4km.gguf" --prompt-tokens 8 --tokens 4
# k-quant super-block scales: a NaN q4_k dmin and an infinite q6_k d in the q4_k_m mix.
cp "$work/tiny-q4km.gguf" "$work/bad-q4km.gguf"
poke "$work/bad-q4km.gguf" $(($(data_at "$work/bad-q4km.gguf" blk.0.attn_q.weight) + 144 * 2 + 2)) '\x01\x7e'
poke "$work/bad-q4km.gguf" $(($(data_at "$work/bad-q4km.gguf" output.weight) + 210 * 7 + 208)) '\x00\x7c'
expect 1 "inspect --check NaN / Inf k-quant super-block scales" -- "$tool" inspect "$work/bad-q4km.gguf" --check
contains out "^NONFINITE  blk.0.attn_q.weight  q4_k: 1 NaN, 0 Inf, .* of 512 scales; first non-finite at block 2 (dmin)" \
  "the q4_k dmin"
contains out "^NONFINITE  output.weight  q6_k: 0 NaN, 1 Inf, .* of 512 scales; first non-finite at block 7 (d)" \
  "the q6_k d"
contains out "2 tensors hold NaN or infinity (1 NaN, 1 Inf)" "the summary counts both"
expect 0 "inspect --check the clean q4_k_m model" -- "$tool" inspect "$work/tiny-q4km.gguf" --check
# A tensor name from the file is printed escaped, so every line stays one line.
{
  printf 'GGUF\x03\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'
  printf '\x0e\x00\x00\x00\x00\x00\x00\x00evil\x1b[31m\nname'          # name: 14 bytes
  printf '\x01\x00\x00\x00\x08\x00\x00\x00\x00\x00\x00\x00'            # 1 dim: 8
  printf '\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00'            # f32, offset 0
  head -c 26 /dev/zero                                                 # pad to 96
  printf '\x00\x00\x80\x3f\x00\x00\x80\x3f\x00\x00\xc0\x7f\x00\x00\x80\x3f'
  printf '\x00\x00\x80\x3f\x00\x00\x80\x3f\x00\x00\x80\x3f\x00\x00\x80\x3f'
} >"$work/evil.gguf"
expect 1 "inspect --check a NaN in a tensor with control bytes in its name" -- \
  "$tool" inspect "$work/evil.gguf" --check
contains out '^NONFINITE  evil\\x1b\[31m\\x0aname  f32: 1 NaN, 0 Inf, 0 subnormal of 8 values; first non-finite at element 2$' \
  "the name is escaped"
one_line "a refusal naming an escaped tensor"
[[ $(wc -l <"$work/out") -eq 2 ]] || { echo "FAIL: the check's report is not two lines"; failures=$((failures + 1)); }
# Malformed files keep the parser's clear error (exit 2), with or without the check.
head -c 100000 "$work/tiny-f32.gguf" >"$work/cut.gguf"
expect 2 "inspect --check a file cut short in its data" -- "$tool" inspect "$work/cut.gguf" --check
contains err "runs past the end" "the parser's error"
expect 2 "inspect --check a truncated header" -- "$tool" inspect "$work/truncated.gguf" --check
expect 2 "run --check-weights a file cut short" -- "$tool" run "$work/cut.gguf" --check-weights
expect 2 "inspect --check --threads beyond the range" -- "$tool" inspect "$work/tiny-f32.gguf" --check --threads 100000

expect 2 "quantize to an unknown type" -- \
  "$tool" quantize "$work/tiny-f32.gguf" "$work/x.gguf" --type q9_z
expect 2 "quantize a missing file" -- \
  "$tool" quantize "$work/missing.gguf" "$work/x.gguf" --type q4_k
expect 2 "quantize onto its own input" -- \
  "$tool" quantize "$work/tiny-f32.gguf" "$work/tiny-f32.gguf" --type q4_k
expect 2 "quantize with a malformed rule" -- \
  "$tool" quantize "$work/tiny-f32.gguf" "$work/x.gguf" --type q4_k --tensor-type 'attn_v'
[[ ! -e "$work/x.gguf" ]] || { echo "FAIL: a failed quantize left an output file"; failures=$((failures + 1)); }

# Hostile inputs and outputs: special files are refused without blocking, an
# output that is not a regular file is never replaced, the input never changes.
input_sum=$(sha256sum "$work/tiny-f32.gguf" | cut -d' ' -f1)
mkfifo "$work/fifo"
expect 2 "inspect a FIFO (no writer: must not block)" -- timeout 20 "$tool" inspect "$work/fifo"
contains err "is a FIFO" "the refusal names the kind of file"
expect 2 "inspect a directory" -- "$tool" inspect "$work"
contains err "is a directory" "the refusal says it is a directory"
expect 2 "inspect a device" -- "$tool" inspect /dev/zero
expect 2 "run a FIFO" -- timeout 20 "$tool" run "$work/fifo"
mkdir "$work/outdir"
expect 2 "quantize onto a directory" -- \
  "$tool" quantize "$work/tiny-f32.gguf" "$work/outdir" --type q8_0
[[ -d "$work/outdir" ]] || { echo "FAIL: the directory was replaced"; failures=$((failures + 1)); }
expect 2 "quantize onto a FIFO" -- \
  timeout 20 "$tool" quantize "$work/tiny-f32.gguf" "$work/fifo" --type q8_0
[[ -p "$work/fifo" ]] || { echo "FAIL: the FIFO was replaced"; failures=$((failures + 1)); }
ln -s "$work/tiny-f32.gguf" "$work/link.gguf"
expect 2 "quantize onto its input through a symbolic link" -- \
  "$tool" quantize "$work/tiny-f32.gguf" "$work/link.gguf" --type q8_0
ln "$work/tiny-f32.gguf" "$work/hard.gguf"
expect 2 "quantize onto its input through a hard link" -- \
  "$tool" quantize "$work/tiny-f32.gguf" "$work/hard.gguf" --type q8_0
rm "$work/hard.gguf"
expect 2 "save the embedded model onto a directory" -- \
  "$tool" run --save-model "$work/outdir" --prompt-tokens 2 --tokens 1
# A write the system refuses part-way (a file-size limit stands in for a full
# disk): exit 1 naming the file, the old output untouched, no temporary left.
echo "old output" >"$work/kept.gguf"
expect 1 "quantize under a 64 KiB file-size limit" -- \
  bash -c 'ulimit -f 64; exec "$0" "$@"' "$tool" quantize "$work/tiny-f32.gguf" "$work/kept.gguf" --type f16
contains err "kept.gguf" "the write error names the output"
[[ $(cat "$work/kept.gguf") == "old output" ]] || { echo "FAIL: the old output changed"; failures=$((failures + 1)); }
if compgen -G "$work/*.tmp.*" >/dev/null; then
  echo "FAIL: a temporary file was left behind: $(ls "$work"/*.tmp.*)"
  failures=$((failures + 1))
fi
[[ $(sha256sum "$work/tiny-f32.gguf" | cut -d' ' -f1) == "$input_sum" ]] ||
  { echo "FAIL: an input file changed"; failures=$((failures + 1)); }

# verify and coverage
expect 0 "verify one op" -- "$tool" verify --op rms_norm
expect 2 "verify an unknown op" -- "$tool" verify --op no_such_op
expect 0 "coverage" -- "$tool" coverage
# Each alternative's claim against a ledger: none yet, then verify's verdicts, a
# forged failure at the current revision, and a corrupt ledger refused.
expect 0 "coverage with no ledger" -- "$tool" coverage --op rms_norm --ledger "$work/ledger.json"
contains out "claims (ledger $work/ledger.json): 0 verified, 0 failed" "nothing is verified yet"
expect 0 "verify rms_norm into a ledger" -- "$tool" verify --op rms_norm --ledger "$work/ledger.json"
expect 0 "coverage --json against it" -- \
  "$tool" coverage --op rms_norm --ledger "$work/ledger.json" --json
cp "$work/out" "$work/coverage.json"
if command -v python3 >/dev/null; then
  python3 - "$work/coverage.json" "$work/ledger.json" "$work/forged.json" <<'PY' ||
import json, sys
cov = json.load(open(sys.argv[1]))
# verify ran what this machine runs: the CPU's (a GPU's stay unverified here).
alts = [a for b in cov["bindings"] if b["backend"] == "cpu" for a in b["alternatives"]]
assert alts and all(a["verification"] in ("verified", "unaudited") for a in alts), alts
assert any(a["verification"] == "verified" for a in alts), alts
ledger = json.load(open(sys.argv[2]))
first = next(a for a in alts if a["verification"] == "verified")
for r in ledger["records"]:
    if r["kernel"] == first["name"] and r["revision_hash"] == first["revision_hash"]:
        r["verdict"] = "fail"
json.dump(ledger, open(sys.argv[3], "w"))
PY
    { echo "FAIL: coverage --json verification states"; failures=$((failures + 1)); }
  expect 0 "coverage against a ledger with a failure" -- \
    "$tool" coverage --op rms_norm --ledger "$work/forged.json"
  contains out "1 failed" "a failed verdict at the current revision shows"
fi
printf '{"version": 1, "records": [' >"$work/cut-ledger.json"
expect 2 "coverage with a corrupt ledger" -- "$tool" coverage --ledger "$work/cut-ledger.json"

# calibrate, and the planner ranking by the profile
expect 0 "calibrate the CPU's add kernels" -- \
  "$tool" calibrate --backend cpu --op add --budget-s 2 --threads 2 --out "$work/cal.json"
contains out "add_f32__cpu_ref" "calibrate lists what it measured"
expect 0 "explain with the profile" -- "$tool" explain --graph mlp --calibration "$work/cal.json"
contains out "measured" "explain says which candidates ranked by measurement"
expect 0 "SWITCHYARD_CALIBRATION" -- \
  env SWITCHYARD_CALIBRATION="$work/cal.json" SWITCHYARD_THREADS=2 "$tool" explain --graph mlp
contains err "kernel(s) measured on this machine" "the profile in the environment is used"
expect 0 "a profile of another thread count is ignored" -- \
  env SWITCHYARD_THREADS=1 "$tool" explain --graph mlp --calibration "$work/cal.json"
contains err "ignored: cpu: measured on" "the mismatch is reported"
# Precision trades (Note [Precision trades]): cuda's TF32 product is rejected by name
# unless the plan admits it; planning needs no device, only the compiled backend.
if "$tool" coverage --backend cuda --op matmul 2>/dev/null | grep -q cublaslt_tf32; then
  expect 0 "explain on cuda" -- "$tool" explain --graph mlp --prefer cuda
  contains out "matmul_f32__cuda_cublaslt_tf32 on cuda: precision_trade" \
    "TF32 is rejected as a precision trade"
  expect 0 "explain on cuda admitting trades" -- \
    "$tool" explain --graph mlp --prefer cuda --admit-precision-trades
  contains out "chosen     matmul_f32__cuda_cublaslt_tf32" "admitted, TF32 wins the prompt on cost"
  lacks out "precision_trade" "nothing is rejected as a trade"
  expect 0 "coverage of cuda's matmuls" -- "$tool" coverage --backend cuda --op matmul
  contains out "cublaslt_tf32 \[cublaslt, trades precision," "coverage marks the trade"
fi
head -c 100 "$work/cal.json" >"$work/cut.json"
expect 2 "a truncated profile" -- "$tool" explain --calibration "$work/cut.json"
contains err "truncated or corrupt" "the refusal says why"
expect 2 "calibrate an unknown op" -- "$tool" calibrate --op no_such_op --out "$work/x.json"

# calibrate at a plan's own shapes
expect 0 "calibrate the kernels the mlp plan may run" -- \
  "$tool" calibrate --backend cpu --graph mlp --budget-s 2 --threads 2 --out "$work/mlp.json"
contains out "matmul_f32__cpu_avx512\|matmul_f32__cpu_avx2\|matmul_f32__cpu_ref" \
  "the plan's matmul siblings are calibrated"
lacks out "softmax" "kernels the plan cannot run are not"
expect 2 "calibrate for an unknown graph" -- "$tool" calibrate --graph nope --out "$work/x.json"
expect 2 "calibrate for a backend not compiled in" -- \
  "$tool" calibrate --backend nope --graph mlp --out "$work/x.json"

# report: the page and its JSON, with a model run, without one, and refusals that
# write nothing (the page itself is checked in a browser: tests/report/).
expect 0 "report of the embedded model" -- \
  "$tool" report --prompt-tokens 8 --tokens 2 --out "$work/report.html" --ledger "$work/ledger.json"
contains out "report   $work/report.html" "report says where the page is"
grep -q 'id="report-data"' "$work/report.html" ||
  { echo "FAIL: the page holds no report data"; failures=$((failures + 1)); }
# Text in the data cannot end its element: a ledger named like markup.
expect 0 "report --no-model with a ledger named like markup" -- \
  "$tool" report --no-model --ledger "$work/a</script><!--b.json" --out "$work/markup.html"
lacks_in_page=$(grep -c '</script><!--b' "$work/markup.html")
[[ $lacks_in_page -eq 0 ]] ||
  { echo "FAIL: the page holds the ledger's name unescaped"; failures=$((failures + 1)); }
expect 0 "report --json" -- "$tool" report --prompt-tokens 8 --tokens 2 --json
cp "$work/out" "$work/report.json"
expect 0 "report --no-model with a profile" -- \
  "$tool" report --no-model --calibration "$work/cal.json" --coverage-backend cpu --json
cp "$work/out" "$work/report-no-model.json"
if command -v python3 >/dev/null; then
  python3 - "$work/report.json" "$work/report-no-model.json" <<'PY' ||
import json, sys
with_model, alone = (json.load(open(p)) for p in sys.argv[1:3])
for r in (with_model, alone):
    assert r["format"] == "switchyard-report" and r["version"] == 1, r.keys()
m = with_model["model"]
assert m["run"]["prompt"]["tokens"] == 8 and m["run"]["generation"]["tokens"] == 2, m["run"]
assert m["plan"]["buckets"] and m["node_times"], "no plan or no node times"
# The node times are the profile's: their sum is the time by op family's.
total = sum(n["ms"] for n in m["node_times"])
families = sum(v for k, v in m["run"]["time_ms_by_family"].items() if k != "copy")
assert abs(total - families) <= 1e-6 * max(1.0, families), (total, families)
assert m["seal"]["violations"] == [] and m["seal"]["probes"] > 0, m["seal"]
assert alone["model"] is None
assert [b["backend"] for b in alone["coverage"]["backends"]] == ["cpu"]
fams = alone["calibration"]["families"]
assert fams and all(s["measured"] and s["fitted"] for f in fams for s in f["series"]), fams
PY
    { echo "FAIL: report --json content"; failures=$((failures + 1)); }
fi
expect 0 "run --report" -- "$tool" run --prompt-tokens 4 --tokens 2 --report "$work/run-report.html"
contains out "report   $work/run-report.html" "run says where its report is"
SWITCHYARD_MASK_KERNELS='cpu:matmul:q4_k' expect 0 "a report with violations" -- \
  "$tool" report --backend cpu --prompt-tokens 4 --tokens 2 --json
contains out '"fallback": "weight converted to f32 at load' "the report holds the violations"
echo old >"$work/kept.html"
expect 2 "report of a missing model" -- "$tool" report "$work/missing.gguf" --out "$work/kept.html"
grep -qx old "$work/kept.html" ||
  { echo "FAIL: a failed report replaced the page"; failures=$((failures + 1)); }
expect 2 "report into a missing directory" -- "$tool" report --out "$work/no-such-dir/r.html"
contains err "not a writable directory" "the refusal names the directory"
expect 2 "run --report to a directory" -- "$tool" run --tokens 1 --report "$work"
expect 2 "report --no-model with a model" -- "$tool" report --no-model "$work/tiny-f32.gguf"
expect 2 "report --coverage-backend without --no-model" -- "$tool" report --coverage-backend cpu
expect 2 "report --coverage-backend unknown" -- "$tool" report --no-model --coverage-backend nope
expect 2 "report with a truncated profile" -- \
  "$tool" report --no-model --calibration "$work/cut.json" --out "$work/r.html"
expect 2 "report with a corrupt ledger" -- \
  "$tool" report --no-model --ledger "$work/cut-ledger.json" --out "$work/r.html"
[[ ! -e "$work/r.html" ]] || { echo "FAIL: a refused report wrote a page"; failures=$((failures + 1)); }

# calibrate --plot: per op family the data, the script and (with matplotlib) an SVG
if python3 -c "import matplotlib" 2>/dev/null; then
  expect 0 "calibrate --plot" -- "$tool" calibrate --backend cpu --op add --budget-s 2 \
    --threads 2 --out "$work/plotted.json" --plot "$work/plots"
  contains out "picture $work/plots/binary.svg" "calibrate --plot names its picture"
  if ! grep -q "<svg" "$work/plots/binary.svg" 2>/dev/null ||
    ! grep -q "add_f32__cpu_ref" "$work/plots/binary.svg"; then
    echo "FAIL: binary.svg is not a picture of the add kernels"
    failures=$((failures + 1))
  fi
  echo '{"format": "something else"}' >"$work/foreign.json"
  expect 2 "the plot script refuses data not its own" -- \
    python3 "$work/plots/plot_calibration.py" "$work/foreign.json"
  contains err "not a switchyard-calibration-plot file" "and says why"
  expect 0 "the plot script draws again from the data left behind" -- \
    python3 "$work/plots/plot_calibration.py" "$work/plots/binary.json"
else
  expect 1 "calibrate --plot without matplotlib" -- "$tool" calibrate --backend cpu --op add \
    --budget-s 2 --threads 2 --out "$work/plotted.json" --plot "$work/plots"
  contains err "python3-matplotlib" "the refusal says what to install"
fi
if [[ ! -f $work/plots/binary.json || ! -f $work/plots/plot_calibration.py ]]; then
  echo "FAIL: calibrate --plot leaves no data or script behind"
  failures=$((failures + 1))
fi
: >"$work/a-file"
expect 2 "calibrate --plot into a file" -- "$tool" calibrate --backend cpu --op add \
  --budget-s 1 --threads 2 --out "$work/plotted.json" --plot "$work/a-file"
contains err "not a directory" "the refusal says why"

# regret: every node's siblings timed, with and without the profile
expect 0 "regret on the example graphs" -- \
  "$tool" regret --graph mlp,block --threads 2 --budget-ms 1 --calibration "$work/cal.json"
contains out "routing regret of the cpu plans" "regret says which backend's plans it measured"
contains out "on 2 threads" "and on how many threads"
contains out "mlp (modelled costs)" "the modelled plan is judged"
contains out "mlp (profile costs)" "and the profile's"
expect 0 "regret as JSON" -- "$tool" regret --graph mlp --threads 2 --budget-ms 1 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d[0]["nodes"][0]["candidates"]' \
  "$work/out" || { echo "FAIL: regret --json is not the documented JSON"; failures=$((failures + 1)); }
expect 0 "regret on the embedded llama" -- \
  "$tool" regret --graph llama --threads 2 --budget-ms 1 --max-tokens 16
contains out "llama (modelled costs)" "the llama plan is judged"
expect 2 "regret on an unknown graph" -- "$tool" regret --graph nope

if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all tool checks passed"
