// The verification ledger: JSON round trips, files, and what counts as verified.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>

#include "switchyard/verify.h"

namespace switchyard {
namespace {

constexpr DType kF32 = DType::kF32;

template <bool kMul>
Status binary_f32(const KernelCall& call) {
  if (call.inputs.size() != 2 || call.outputs.size() != 1) return invalid_argument_error("arity");
  const std::int64_t n = call.outputs[0].numel();
  const float* a = call.inputs[0].first_as<const float>();
  const float* b = call.inputs[1].first_as<const float>();
  float* out = call.outputs[0].first_as<float>();
  for (std::int64_t i = 0; i < n; ++i) out[i] = kMul ? a[i] * b[i] : a[i] + b[i];
  return Status::ok();
}

KernelBindingTable make_table(std::uint32_t revision, PrecisionGuarantee precision) {
  KernelBindingTable table;
  table.register_kernel(
      OpKind::kAdd, {kF32, kF32, kF32}, BackendId::kCpu, &binary_f32<false>,
      {.name = "add_f32__ledger_test", .precision = precision, .revision = revision});
  table.register_kernel(OpKind::kMul, {kF32, kF32, kF32}, BackendId::kCpu, &binary_f32<true>,
                        {.name = "mul_f32__ledger_unaudited"});
  EXPECT_TRUE(table.finalize().is_ok());
  return table;
}

PrecisionGuarantee exact() {
  return PrecisionGuarantee::bounded(true, true, 0.5, std::nullopt, std::nullopt);
}

std::filesystem::path temp_path(std::string_view stem) {
  return std::filesystem::temp_directory_path() /
         (std::string(stem) + "-" +
          std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json");
}

TEST(VerifyLedgerTest, JsonRoundTripKeepsEveryField) {
  VerificationLedger ledger;
  ledger.put({.kernel = "add_f32__cpu_ref",
              .revision_hash = 0x0123456789abcdefULL,
              .verdict = VerifyVerdict::kPass,
              .cases = 8,
              .worst_nmse = 1.25e-15,
              .worst_max_abs = 5.960464477539063e-08,
              .bit_stable_checked = true,
              .date = "2026-12-02T10:00:00Z"});
  ledger.put({.kernel = "odd \"name\"\\with\tescapes",
              .revision_hash = 0xffffffffffffffffULL,
              .verdict = VerifyVerdict::kFail,
              .cases = 3,
              .worst_nmse = std::numeric_limits<double>::infinity(),
              .worst_max_abs = std::numeric_limits<double>::infinity(),
              .bit_stable_checked = false,
              .date = "2026-12-02T10:00:01Z"});
  const std::string text = ledger.to_json();
  Result<VerificationLedger> back = VerificationLedger::from_json(text);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string() << "\n" << text;
  ASSERT_EQ(back->records().size(), 2u);
  for (const LedgerRecord& r : ledger.records()) {
    const LedgerRecord* found = back->find(r.kernel, r.revision_hash);
    ASSERT_NE(found, nullptr) << r.kernel;
    EXPECT_EQ(*found, r);
  }
  EXPECT_NE(text.find("\"revision_hash\": \"0123456789abcdef\""), std::string::npos);
}

TEST(VerifyLedgerTest, MalformedJsonIsDataLoss) {
  for (std::string_view bad :
       {"", "{", "[]", "{\"version\": 2, \"records\": []}", "{\"version\": 1}",
        "{\"version\": 1, \"records\": [{\"kernel\": \"k\"}]}",
        "{\"version\": 1, \"records\": [1]} trailing",
        "{\"version\": 1, \"records\": [{\"kernel\": \"k\", \"revision_hash\": \"xyz\", "
        "\"verdict\": \"pass\", \"cases\": 1, \"worst_nmse\": 0, \"worst_max_abs\": 0, "
        "\"bit_stable_checked\": true, \"date\": \"d\"}]}",
        "{\"version\": 1, \"records\": [{\"kernel\": \"k\", \"revision_hash\": \"1\", "
        "\"verdict\": \"great\", \"cases\": 1, \"worst_nmse\": 0, \"worst_max_abs\": 0, "
        "\"bit_stable_checked\": true, \"date\": \"d\"}]}"}) {
    Result<VerificationLedger> r = VerificationLedger::from_json(bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << bad;
  }
  EXPECT_TRUE(VerificationLedger::from_json("{\"version\": 1, \"records\": []}").is_ok());
}

TEST(VerifyLedgerTest, FileRoundTripAndMissingFileIsEmpty) {
  const std::filesystem::path path = temp_path("switchyard-ledger");
  std::filesystem::remove(path);
  Result<VerificationLedger> empty = VerificationLedger::load(path.string());
  ASSERT_TRUE(empty.is_ok());
  EXPECT_TRUE(empty->records().empty());

  const KernelBindingTable table = make_table(1, exact());
  VerificationLedger ledger;
  for (const VerifyEntryReport& r : verify_table(table)) ledger.record(r, utc_date_now());
  ASSERT_TRUE(ledger.save(path.string()).is_ok());
  Result<VerificationLedger> loaded = VerificationLedger::load(path.string());
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  ASSERT_EQ(loaded->records().size(), 2u);
  for (const LedgerRecord& r : ledger.records())
    EXPECT_EQ(*loaded->find(r.kernel, r.revision_hash), r);

  // A corrupt file is refused, not treated as empty.
  std::ofstream(path) << "{\"version\": 1, \"records\": [";
  Result<VerificationLedger> corrupt = VerificationLedger::load(path.string());
  ASSERT_FALSE(corrupt.is_ok());
  EXPECT_EQ(corrupt.status().code(), StatusCode::kDataLoss);
  std::filesystem::remove(path);
  // A ledger in a directory that does not exist cannot be saved.
  EXPECT_FALSE(ledger.save((path / "nope" / "ledger.json").string()).is_ok());
}

TEST(VerifyLedgerTest, APassVerifiesOnlyTheCurrentRevision) {
  const KernelBindingTable v1 = make_table(1, exact());
  VerificationLedger ledger;
  // Nothing recorded: the claim is unverified; the unaudited entry is not listed.
  std::vector<UnverifiedClaim> before = unverified_claims(v1, ledger);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].kernel, "add_f32__ledger_test");
  EXPECT_EQ(before[0].why, "never verified");

  const std::vector<VerifyEntryReport> reports = verify_table(v1);
  ASSERT_EQ(reports.size(), 2u);
  ASSERT_EQ(reports[0].verdict, VerifyVerdict::kPass) << reports[0].reason;
  EXPECT_EQ(reports[1].verdict, VerifyVerdict::kUnaudited);
  for (const VerifyEntryReport& r : reports) ledger.record(r, "2026-12-02T10:00:00Z");
  const BindingEntry& entry_v1 = **v1.lookup(OpKind::kAdd, {kF32, kF32, kF32}, BackendId::kCpu);
  EXPECT_TRUE(ledger.is_verified(entry_v1));
  EXPECT_TRUE(unverified_claims(v1, ledger).empty());
  // An unaudited entry is never verified, even with a clean run recorded.
  EXPECT_FALSE(ledger.is_verified(**v1.lookup(OpKind::kMul, {kF32, kF32, kF32}, BackendId::kCpu)));

  // Bumping the revision changes the hash: the old pass no longer counts.
  const KernelBindingTable v2 = make_table(2, exact());
  const BindingEntry& entry_v2 = **v2.lookup(OpKind::kAdd, {kF32, kF32, kF32}, BackendId::kCpu);
  ASSERT_NE(entry_v1.revision_hash, entry_v2.revision_hash);
  EXPECT_FALSE(ledger.is_verified(entry_v2));
  std::vector<UnverifiedClaim> after = unverified_claims(v2, ledger);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].why, "verified only for another revision");
  EXPECT_EQ(after[0].revision_hash, entry_v2.revision_hash);

  // A failing verdict for the current revision is recorded and is not a pass.
  VerifyEntryReport failed = verify_table(v2)[0];
  failed.verdict = VerifyVerdict::kFail;
  ledger.record(failed, "2026-12-02T10:05:00Z");
  EXPECT_FALSE(ledger.is_verified(entry_v2));
  EXPECT_EQ(unverified_claims(v2, ledger)[0].why, "last verdict for this revision: fail");
  // Re-verifying replaces that record (one record per kernel and revision).
  ledger.record(verify_table(v2)[0], "2026-12-02T10:06:00Z");
  EXPECT_TRUE(ledger.is_verified(entry_v2));
  EXPECT_EQ(ledger.records().size(), 3u);  // v1 add, v1 mul, v2 add
}

TEST(VerifyLedgerTest, UtcDateIsIso8601) {
  const std::string date = utc_date_now();
  ASSERT_EQ(date.size(), 20u) << date;
  EXPECT_EQ(date[4], '-');
  EXPECT_EQ(date[10], 'T');
  EXPECT_EQ(date.back(), 'Z');
}

}  // namespace
}  // namespace switchyard
