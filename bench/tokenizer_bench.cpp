// Encoding and decoding speed of the tokenizers, on one thread, over
// tests/data/text/heldout.txt (462 KB of mixed scripts, numbers, code, emoji and
// whitespace) as one text. The vocabularies are the reference tokenizers that
// tests/models/tokenizer_reference.py trains (one per kind, written to
// build/tokenizers/<kind>/tokenizer.gguf by the command below; a kind whose file is
// missing is skipped) and the embedded models' trained one. Run:
//   for k in spm bpe-default bpe-llama bpe-qwen2; do build/pyenv/bin/python
//     tests/models/tokenizer_reference.py $k tests/data/text/train.txt
//     tests/data/text/heldout.txt build/tokenizers/$k; done
//   ./build/dev/bench/switchyard_bench --benchmark_filter=Tokenizer
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "switchyard/gguf.h"
#include "switchyard/tokenizer.h"

namespace switchyard {
namespace {

const std::filesystem::path kSource = SWITCHYARD_SOURCE_DIR;

std::string heldout_text() {
  std::ifstream in(kSource / "tests" / "data" / "text" / "heldout.txt", std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::optional<Tokenizer> load(const std::string& kind) {
  if (kind == "embedded") {
    GgufMetadata md;
    if (!add_trained_tokenizer(heldout_text().substr(0, 20000), 2048, md).is_ok()) return {};
    Result<Tokenizer> t = Tokenizer::from_metadata(md);
    return t.is_ok() ? std::optional<Tokenizer>(std::move(*t)) : std::nullopt;
  }
  Result<GgufFile> file =
      GgufFile::open(kSource / "build" / "tokenizers" / kind / "tokenizer.gguf");
  if (!file.is_ok()) return std::nullopt;
  Result<Tokenizer> t = Tokenizer::from_metadata(file->metadata());
  return t.is_ok() ? std::optional<Tokenizer>(std::move(*t)) : std::nullopt;
}

void BM_TokenizerEncode(benchmark::State& state, const std::string& kind) {
  const std::string text = heldout_text();
  const std::optional<Tokenizer> tokenizer = load(kind);
  if (text.empty()) return state.SkipWithError("tests/data/text/heldout.txt is missing");
  if (!tokenizer) return state.SkipWithError(("no tokenizer for " + kind).c_str());
  std::size_t tokens = 0;
  for (auto _ : state) {
    std::vector<std::int32_t> ids = tokenizer->encode(text, {.add_special = false});
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_TokenizerDecode(benchmark::State& state, const std::string& kind) {
  const std::string text = heldout_text();
  const std::optional<Tokenizer> tokenizer = load(kind);
  if (text.empty()) return state.SkipWithError("tests/data/text/heldout.txt is missing");
  if (!tokenizer) return state.SkipWithError(("no tokenizer for " + kind).c_str());
  const std::vector<std::int32_t> ids = tokenizer->encode(text, {.add_special = false});
  for (auto _ : state) {
    Result<std::string> back = tokenizer->decode(ids, {.at_start = false});
    benchmark::DoNotOptimize(back);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
  state.counters["ns_per_token"] = benchmark::Counter(
      static_cast<double>(ids.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

BENCHMARK_CAPTURE(BM_TokenizerEncode, spm, std::string("spm"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TokenizerEncode, bpe_default, std::string("bpe-default"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TokenizerEncode, bpe_llama, std::string("bpe-llama"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TokenizerEncode, bpe_qwen2, std::string("bpe-qwen2"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TokenizerEncode, embedded, std::string("embedded"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TokenizerDecode, spm, std::string("spm"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TokenizerDecode, bpe_llama, std::string("bpe-llama"))
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace switchyard
