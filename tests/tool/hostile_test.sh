#!/usr/bin/env bash
# The hostile-input suite: malformed files (written by hostile_files.py), absurd
# flags, special files, unwritable outputs, bad environments and concurrent
# writers, across every command. Each case is one row of the table below and is
# checked for
#   - its exit status (0 success, 1 a failed check, 2 bad usage or input), and
#     never a signal (a crash or an abort is a status above 128);
#   - on failure, exactly one line on stderr, starting "switchyard:", holding
#     the text the row names;
# and after the table: no temporary file left anywhere in the work directory,
# and every input file byte for byte as it was.
# Usage: hostile_test.sh PATH/TO/switchyard   (ctest passes the built tool)
set -uo pipefail
tool=${1:?usage: hostile_test.sh PATH/TO/switchyard}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
cases=0
export SWITCHYARD_THREADS=2

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# hostile STATUS TEXT DESCRIPTION -- COMMAND...: one row of the table. TEXT is a
# fixed string the one-line error must hold ("" for any; ignored on success).
hostile() {
  local want=$1 text=$2 what=$3
  shift 4
  cases=$((cases + 1))
  "$@" >"$work/out" 2>"$work/err" </dev/null
  local got=$?
  if ((got != want)); then
    fail "$what: exit $got, expected $want: $*"
    sed 's/^/  stderr: /' "$work/err" | head -5
    return
  fi
  if ((want != 0)); then
    local lines
    lines=$(wc -l <"$work/err")
    if ((lines != 1)) || ! head -c 12 "$work/err" | grep -q '^switchyard:'; then
      fail "$what: the error is not one 'switchyard:' line ($lines lines)"
      sed 's/^/  stderr: /' "$work/err" | head -5
      return
    fi
    if [[ -n $text ]] && ! grep -qF -- "$text" "$work/err"; then
      fail "$what: '$text' not in: $(cat "$work/err")"
      return
    fi
  fi
  echo "ok: $what (exit $got)"
}

in="$work/in"
mkdir "$in"
python3 "$here/hostile_files.py" "$in" || { echo "FAIL: hostile_files.py"; exit 1; }
"$tool" run --model-type f32 --save-model "$in/model.gguf" --prompt-tokens 2 --tokens 1 >/dev/null ||
  { echo "FAIL: could not save the embedded model"; exit 1; }
sums=$(cd "$in" && sha256sum -- *.gguf)
mkfifo "$work/fifo"
mkdir "$work/out.d"

# -- Malformed files, through inspect (the reader's every refusal) ------------
while read -r file text; do
  hostile 2 "$text" "inspect $file" -- "$tool" inspect "$in/$file.gguf"
done <<'TABLE'
empty too short to hold the GGUF magic
three_bytes too short to hold the GGUF magic
bad_magic not a GGUF file
version_0 unsupported GGUF version 0
version_99 unsupported GGUF version 99
header_cut truncated file
tensor_count_2e63 tensor count 9223372036854775808
kv_count_2e60 metadata count 1152921504606846976
key_length_2e62 claims 4611686018427387904 bytes
key_past_end claims 100 bytes
value_type_99 not a GGUF value type
string_past_end claims 1099511627776 bytes
array_count_2e60 claims 1152921504606846976 u8 elements
array_type_99 not a GGUF value type
array_nesting_deep array element 0
duplicate_key duplicate metadata key 'a'
alignment_0 general.alignment is 0
alignment_3 general.alignment is 3
alignment_string not u32
tensor_name_2e40 claims 1099511627776 bytes
tensor_0_dims has 0 dimensions
tensor_5_dims has 5 dimensions
tensor_dim_0 dimensions must be 1 to
tensor_dim_2e63 dimensions must be 1 to
tensor_dims_overflow more elements than fit in int64
tensor_type_99 ggml type id 99
tensor_type_removed_q4_2 ggml type id 4
tensor_row_not_blocks not a whole number of 32-element blocks
tensor_offset_misaligned not a multiple of the alignment
tensor_data_past_end runs past the end
tensors_overlap overlaps tensor 'b'
duplicate_tensor duplicate tensor name 'w'
tensor_infos_cut truncated file
control_bytes_in_name w\x0a\x1b[31mred
control_bytes_in_key k\x0a\x1b]0;title\x07
TABLE

# -- Files that parse but are no model Switchyard runs, and the other commands -
hostile 2 "general.architecture' is missing" "run a GGUF file without metadata" -- \
  "$tool" run "$in/no_metadata.gguf"
hostile 2 "'gpt9'" "run an unknown architecture" -- "$tool" run "$in/architecture_gpt9.gguf"
hostile 2 "llama.context_length' is missing" "run a llama file without its keys" -- \
  "$tool" run "$in/llama_without_keys.gguf"
hostile 2 "\\x1b[31mred" "run a file whose tensor name holds escapes" -- \
  "$tool" run "$in/control_bytes_in_name.gguf"
hostile 2 "too short" "run an empty file" -- "$tool" run "$in/empty.gguf"
hostile 2 "runs past the end" "quantize a truncated tensor" -- \
  "$tool" quantize "$in/tensor_data_past_end.gguf" "$work/q.gguf" --type q8_0
hostile 2 "duplicate metadata key" "quantize a duplicate key" -- \
  "$tool" quantize "$in/control_bytes_in_key.gguf" "$work/q.gguf" --type q8_0
hostile 2 "not a GGUF file" "quantize a file that is not GGUF" -- \
  "$tool" quantize "$in/bad_magic.gguf" "$work/q.gguf" --type q8_0
hostile 2 "cannot open" "inspect a missing file" -- "$tool" inspect "$work/missing.gguf"
hostile 2 "cannot open" "inspect a path through a file" -- "$tool" inspect "$in/empty.gguf/x"

# -- Absurd flags: usage errors that name the flag ----------------------------
hostile 2 "--threads" "run --threads beyond the limit" -- "$tool" run --threads 1025
hostile 2 "--threads" "run --threads -1" -- "$tool" run --threads -1
hostile 2 "--tokens" "run --tokens -5" -- "$tool" run --tokens -5
hostile 2 "--tokens" "run --tokens 2^64" -- "$tool" run --tokens 18446744073709551616
hostile 2 "--prompt-tokens" "run --prompt-tokens 2^21" -- "$tool" run --prompt-tokens 2097152
hostile 2 "--tokens" "run --tokens 1.5" -- "$tool" run --tokens 1.5
hostile 2 "context" "run more tokens than the model's context" -- \
  "$tool" run "$in/model.gguf" --prompt-tokens 1000000 --tokens 1000000
hostile 2 "--threads" "quantize --threads 2^40" -- \
  "$tool" quantize "$in/model.gguf" "$work/q.gguf" --type q8_0 --threads 1099511627776
hostile 2 "q9_9" "quantize to an unknown type" -- \
  "$tool" quantize "$in/model.gguf" "$work/q.gguf" --type q9_9
hostile 2 "--threads" "verify --threads 0" -- "$tool" verify --threads 0 --no-record
hostile 2 "" "verify an unknown backend" -- "$tool" verify --backend no_such --no-record
hostile 2 "--max-tokens" "explain --max-tokens 2^62" -- "$tool" explain --max-tokens 4611686018427387904
# Text that is not text: bytes that are no UTF-8, a binary as the prompt (far
# more tokens than the context), special files, an empty file.
hostile 0 "" "run a prompt that is not UTF-8" -- "$tool" run --prompt $'\xff\xfe\x80 \xc3' --tokens 2
# The tool's first 4 MiB: its whole self is past the 256 MiB limit in sanitizer
# builds, and that is another check's.
head -c 4194304 "$tool" >"$work/binary_prompt"
hostile 2 "exceed the model's context" "run a binary as the prompt" -- \
  "$tool" run --prompt-file "$work/binary_prompt" --tokens 1
hostile 2 "not a readable file" "run --prompt-file a directory" -- "$tool" run --prompt-file "$work"
hostile 2 "longer than 256 MiB" "run --prompt-file /dev/zero" -- "$tool" run --prompt-file /dev/zero
hostile 0 "" "run --prompt-file an empty file" -- "$tool" run --prompt-file /dev/null --tokens 1
head -c 200000 "$tool" >"$work/binary.bin"
hostile 0 "" "perplexity over a binary" -- \
  "$tool" perplexity --file "$work/binary.bin" --ctx 64 --chunks 2
hostile 2 "fewer than one chunk" "perplexity over an empty file" -- \
  "$tool" perplexity --file /dev/null
hostile 2 "" "an unknown command" -- "$tool" no-such-command
hostile 2 "--no-such-flag" "an unknown flag" -- "$tool" run --no-such-flag
hostile 2 "--synthetic" "run --synthetic with no such shape" -- "$tool" run --synthetic llama9
hostile 2 "--synthetic" "run --synthetic beside a model file" -- \
  "$tool" run "$in/model.gguf" --synthetic llama3-1b

# -- Special files: refused before any blocking read --------------------------
hostile 2 "is a FIFO" "inspect a FIFO" -- timeout 20 "$tool" inspect "$work/fifo"
hostile 2 "is a FIFO" "quantize from a FIFO" -- \
  timeout 20 "$tool" quantize "$work/fifo" "$work/q.gguf" --type q8_0
hostile 2 "is a directory" "run a directory" -- "$tool" run "$work"
hostile 2 "is a device" "inspect /dev/zero" -- "$tool" inspect /dev/zero
hostile 2 "is a device" "inspect /dev/null" -- "$tool" inspect /dev/null

# -- Outputs: never replaced when not a regular file; never the input -------
hostile 2 "is a directory" "quantize onto a directory" -- \
  "$tool" quantize "$in/model.gguf" "$work/out.d" --type q8_0
hostile 2 "is a device" "quantize onto /dev/null" -- \
  "$tool" quantize "$in/model.gguf" /dev/null --type q8_0
hostile 2 "is a FIFO" "quantize onto a FIFO" -- \
  timeout 20 "$tool" quantize "$in/model.gguf" "$work/fifo" --type q8_0
hostile 2 "is the input" "quantize onto its input" -- \
  "$tool" quantize "$in/model.gguf" "$in/model.gguf" --type q8_0
hostile 2 "" "quantize into a missing directory" -- \
  "$tool" quantize "$in/model.gguf" "$work/no/such/dir/q.gguf" --type q8_0
hostile 2 "is a directory" "save the embedded model onto a directory" -- \
  "$tool" run --save-model "$work/out.d" --prompt-tokens 2 --tokens 1
hostile 2 "only a regular file" "run --logits-out onto a FIFO" -- \
  timeout 20 "$tool" run --prompt-tokens 2 --tokens 1 --logits-out "$work/fifo"
hostile 2 "only a regular file" "perplexity --logits-out onto /dev/null" -- \
  "$tool" perplexity --file "$in/model.gguf" --logits-out /dev/null
hostile 2 "only a regular file" "a report page onto /dev/null" -- "$tool" report --no-model --out /dev/null
hostile 2 "only a regular file" "a report page onto a FIFO" -- \
  timeout 20 "$tool" report --no-model --out "$work/fifo"
hostile 2 "only a regular file" "run --report onto a directory" -- \
  "$tool" run --report "$work/out.d" --prompt-tokens 2 --tokens 1
hostile 2 "it is the model file" "a report page onto its model" -- \
  "$tool" report "$in/model.gguf" --out "$in/model.gguf"
hostile 2 "not a writable directory" "a report page into a missing directory" -- \
  "$tool" report --no-model --out "$work/no/such/dir/r.html"
hostile 1 "" "inspect into a full stdout" -- bash -c '"$0" inspect "$1" >/dev/full' "$tool" "$in/model.gguf"
hostile 1 "" "coverage into a full stdout" -- bash -c '"$0" coverage >/dev/full' "$tool"
hostile 1 "q.gguf" "quantize under a 16 KiB file-size limit" -- \
  bash -c 'ulimit -f 16; exec "$0" "$@"' "$tool" quantize "$in/model.gguf" "$work/q.gguf" --type f16

# -- Environment: an unknown name or value is a usage error at start-up -------
hostile 2 "SWITCHYARD_STRICT_KERNELS" "a misspelt strict policy" -- \
  env SWITCHYARD_STRICT_KERNELS=maybe "$tool" coverage
hostile 2 "SWITCHYARD_THREADS" "SWITCHYARD_THREADS=0" -- env SWITCHYARD_THREADS=0 "$tool" coverage
hostile 2 "SWITCHYARD_THREADS" "SWITCHYARD_THREADS=2^40" -- \
  env SWITCHYARD_THREADS=1099511627776 "$tool" coverage
hostile 2 "avx3" "an unknown CPU feature to disable" -- env SWITCHYARD_CPU_DISABLE=avx3 "$tool" coverage
hostile 2 "SWITCHYARD_NO_SUCH" "an unknown SWITCHYARD_ variable" -- env SWITCHYARD_NO_SUCH=1 "$tool" coverage
hostile 2 "SWITCHYARD_MASK_KERNELS" "a malformed kernel mask" -- \
  env SWITCHYARD_MASK_KERNELS='cpu:no_such_op' "$tool" coverage

# -- Concurrent writers of one output: both finish, the file is whole ----------
cases=$((cases + 1))
"$tool" quantize "$in/model.gguf" "$work/shared.gguf" --type q8_0 >/dev/null 2>"$work/err1" &
first=$!
"$tool" quantize "$in/model.gguf" "$work/shared.gguf" --type q4_0 >/dev/null 2>"$work/err2" &
second=$!
wait $first; s1=$?
wait $second; s2=$?
if ((s1 != 0 || s2 != 0)); then
  fail "concurrent quantize into one output: exits $s1 and $s2"
elif ! "$tool" inspect "$work/shared.gguf" >/dev/null 2>&1; then
  fail "concurrent quantize into one output: the result does not parse"
else
  echo "ok: concurrent quantize into one output (both exit 0, the file parses)"
fi

# -- After everything ----------------------------------------------------------
if leftovers=$(find "$work" -name '*.tmp.*' | head -5) && [[ -n $leftovers ]]; then
  fail "temporary files left behind: $leftovers"
fi
[[ $(cd "$in" && sha256sum -- *.gguf) == "$sums" ]] || fail "an input file changed"
echo "$cases hostile cases"
if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all hostile-input checks passed"
