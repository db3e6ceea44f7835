// The CPU's collectives between simulated ranks (threads of one HostRankGroup):
// the sums against float64, the same bits on every rank, an output that is its
// input's memory, a rank that aborts the group, and calls that do not fit. The
// tests whose ranks run at once are named *Concurrent*, so that the test command
// runs them under ThreadSanitizer too.
#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cpu/layout/layout.h"
#include "switchyard/collective.h"
#include "switchyard/half.h"
#include "switchyard/thread_pool.h"

namespace switchyard {
namespace {

Status call(OpKind op, DType dtype, const TensorView& x, const TensorView& out, int ranks,
            Communicator* comm, ParallelRunner* runner = nullptr) {
  OpParams params;
  params.ranks = ranks;
  ExecContext ctx{.runner = runner, .comm = comm};
  const TensorView in[] = {x};
  const TensorView outs[] = {out};
  return cpu::collective_kernel(
      op, dtype)({.inputs = in, .outputs = outs, .params = params, .ctx = ctx, .name = name(op)});
}

// Runs body(rank) on one thread per rank of `group`, aborting the group when a
// rank fails (as a tensor-parallel driver must), and returns every rank's status.
std::vector<Status> on_every_rank(HostRankGroup& group, const std::function<Status(int)>& body) {
  std::vector<Status> status(static_cast<std::size_t>(group.size()));
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < group.size(); ++r) {
      threads.emplace_back([&, r] {
        Status s = body(r);
        if (!s.is_ok()) group.abort(s);
        status[static_cast<std::size_t>(r)] = std::move(s);
      });
    }
  }
  return status;
}

std::vector<std::vector<float>> random_ranks(int ranks, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<std::vector<float>> x(static_cast<std::size_t>(ranks), std::vector<float>(n));
  for (auto& v : x) {
    for (float& e : v) e = dist(rng);
  }
  return x;
}

class ConcurrentCollectiveTest : public ::testing::TestWithParam<int> {};

TEST_P(ConcurrentCollectiveTest, AllReduceSumsEveryRankAndEveryRankHoldsTheSameBits) {
  const int ranks = GetParam();
  // More elements than a chunk per rank divides evenly, on a pool per rank.
  constexpr std::int64_t kRows = 5, kCols = 4099;
  auto x = random_ranks(ranks, kRows * kCols, 7);
  std::vector<std::vector<float>> out(x.size(), std::vector<float>(x[0].size(), -1.0f));
  auto group = HostRankGroup::create(ranks).value();
  const auto status = on_every_rank(*group, [&](int r) {
    ThreadPool pool(2);
    const auto i = static_cast<std::size_t>(r);
    return call(OpKind::kAllReduce, DType::kF32,
                TensorView::contiguous(x[i].data(), DType::kF32, {kRows, kCols}),
                TensorView::contiguous(out[i].data(), DType::kF32, {kRows, kCols}), ranks,
                &group->rank(r), &pool);
  });
  for (const Status& s : status) ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (std::size_t e = 0; e < x[0].size(); ++e) {
    double exact = 0, magnitude = 0;
    for (const auto& v : x) {
      exact += v[e];
      magnitude += std::abs(v[e]);
    }
    ASSERT_NEAR(out[0][e], exact, (ranks - 1) * 0x1p-24 * magnitude + 1e-30) << e;
    for (std::size_t r = 1; r < out.size(); ++r) ASSERT_EQ(out[r][e], out[0][e]) << r << " " << e;
  }
}

TEST_P(ConcurrentCollectiveTest, AllReduceInPlace) {
  const int ranks = GetParam();
  auto x = random_ranks(ranks, 1000, 11);
  std::vector<float> expected(1000);
  for (std::size_t e = 0; e < expected.size(); ++e) {
    float sum = x[0][e];
    for (std::size_t r = 1; r < x.size(); ++r) sum += x[r][e];
    expected[e] = sum;  // rank order, in f32: what the kernel computes
  }
  auto group = HostRankGroup::create(ranks).value();
  const auto status = on_every_rank(*group, [&](int r) {
    const TensorView v =
        TensorView::contiguous(x[static_cast<std::size_t>(r)].data(), DType::kF32, {1000});
    return call(OpKind::kAllReduce, DType::kF32, v, v, ranks, &group->rank(r));
  });
  for (const Status& s : status) ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (const auto& v : x) EXPECT_EQ(v, expected);
}

TEST_P(ConcurrentCollectiveTest, AllGatherJoinsTheRanksAlongTheLastDimension) {
  const int ranks = GetParam();
  constexpr std::int64_t kRows = 3, kCols = 5;
  auto x = random_ranks(ranks, kRows * kCols, 3);
  std::vector<std::vector<float>> out(x.size(), std::vector<float>(x[0].size() * x.size()));
  auto group = HostRankGroup::create(ranks).value();
  const auto status = on_every_rank(*group, [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    return call(OpKind::kAllGather, DType::kF32,
                TensorView::contiguous(x[i].data(), DType::kF32, {kRows, kCols}),
                TensorView::contiguous(out[i].data(), DType::kF32, {kRows, kCols * ranks}), ranks,
                &group->rank(r));
  });
  for (const Status& s : status) ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (const auto& o : out) {
    for (std::int64_t row = 0; row < kRows; ++row) {
      for (int s = 0; s < ranks; ++s) {
        for (std::int64_t c = 0; c < kCols; ++c) {
          ASSERT_EQ(o[static_cast<std::size_t>((row * ranks + s) * kCols + c)],
                    x[static_cast<std::size_t>(s)][static_cast<std::size_t>(row * kCols + c)]);
        }
      }
    }
  }
}

TEST_P(ConcurrentCollectiveTest, ReduceScatterKeepsEachRanksColumnsOfTheSum) {
  const int ranks = GetParam();
  constexpr std::int64_t kRows = 4, kCols = 6;  // per rank
  auto x = random_ranks(ranks, static_cast<std::size_t>(kRows * kCols * ranks), 5);
  std::vector<std::vector<float>> out(x.size(), std::vector<float>(kRows * kCols));
  auto group = HostRankGroup::create(ranks).value();
  const auto status = on_every_rank(*group, [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    return call(OpKind::kReduceScatter, DType::kF32,
                TensorView::contiguous(x[i].data(), DType::kF32, {kRows, kCols * ranks}),
                TensorView::contiguous(out[i].data(), DType::kF32, {kRows, kCols}), ranks,
                &group->rank(r));
  });
  for (const Status& s : status) ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (int r = 0; r < ranks; ++r) {
    for (std::int64_t row = 0; row < kRows; ++row) {
      for (std::int64_t c = 0; c < kCols; ++c) {
        const auto at = static_cast<std::size_t>(row * kCols * ranks + r * kCols + c);
        float sum = x[0][at];
        for (std::size_t s = 1; s < x.size(); ++s) sum += x[s][at];
        ASSERT_EQ(out[static_cast<std::size_t>(r)][static_cast<std::size_t>(row * kCols + c)], sum);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, ConcurrentCollectiveTest, ::testing::Values(1, 2, 3, 4));

TEST(CollectiveTest, HalfPrecisionSumsAreRoundedOnce) {
  // 1 + 2^-11 + 2^-11 in f16: rounding after each add would lose both halves.
  const std::uint16_t one = f32_to_f16(1.0f), tiny = f32_to_f16(0x1p-11f);
  std::vector<std::vector<std::uint16_t>> x = {{one}, {tiny}, {tiny}};
  std::vector<std::vector<std::uint16_t>> out(3, std::vector<std::uint16_t>(1));
  auto group = HostRankGroup::create(3).value();
  const auto status = on_every_rank(*group, [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    return call(OpKind::kAllReduce, DType::kF16,
                TensorView::contiguous(x[i].data(), DType::kF16, {1}),
                TensorView::contiguous(out[i].data(), DType::kF16, {1}), 3, &group->rank(r));
  });
  for (const Status& s : status) ASSERT_TRUE(s.is_ok()) << s.to_string();
  for (const auto& o : out) EXPECT_EQ(f16_to_f32(o[0]), 1.0f + 0x1p-10f);
}

TEST(CollectiveTest, ConcurrentRanksAreReleasedByARankThatFails) {
  std::vector<float> x(8, 1.0f), out(8);
  auto group = HostRankGroup::create(3).value();
  const auto status = on_every_rank(*group, [&](int r) {
    if (r == 1) return out_of_range_error("rank 1 failed before its all_reduce");
    return call(OpKind::kAllReduce, DType::kF32, TensorView::contiguous(x.data(), DType::kF32, {8}),
                TensorView::contiguous(out.data(), DType::kF32, {8}), 3, &group->rank(r));
  });
  // The peers get the failing rank's error instead of waiting for ever.
  for (const Status& s : status) {
    EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
    EXPECT_NE(s.message().find("rank 1 failed"), std::string::npos) << s.to_string();
  }
  EXPECT_TRUE(group->aborted());
  // A later collective of the aborted group returns at once.
  EXPECT_EQ(group->rank(0).barrier().code(), StatusCode::kOutOfRange);
}

TEST(CollectiveTest, CallsThatDoNotFitTheGroupAreRefused) {
  std::vector<float> x(8), out(16);
  const TensorView v = TensorView::contiguous(x.data(), DType::kF32, {2, 4});
  // Planned for two ranks, run without a communicator.
  Status s = call(OpKind::kAllReduce, DType::kF32, v, v, 2, nullptr);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("no communicator"), std::string::npos) << s.to_string();
  // Planned for two, the group has three.
  auto group = HostRankGroup::create(3).value();
  s = call(OpKind::kAllReduce, DType::kF32, v, v, 2, &group->rank(0));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("the communicator has 3"), std::string::npos) << s.to_string();
  // all_gather's output must be ranks times as wide (checked before any rank
  // waits for its peers).
  auto pair = HostRankGroup::create(2).value();
  s = call(OpKind::kAllGather, DType::kF32, v,
           TensorView::contiguous(out.data(), DType::kF32, {2, 4}), 2, &pair->rank(0));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  // reduce_scatter's columns must split over the ranks.
  s = call(OpKind::kReduceScatter, DType::kF32,
           TensorView::contiguous(x.data(), DType::kF32, {1, 7}),
           TensorView::contiguous(out.data(), DType::kF32, {1, 3}), 2, &pair->rank(0));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  // No ranks at all: refused, not a division by zero.
  for (OpKind op : kOpsOfFamily<OpFamily::kCollective>) {
    EXPECT_EQ(call(op, DType::kF32, v, v, 0, nullptr).code(), StatusCode::kInvalidArgument)
        << name(op);
  }
  EXPECT_EQ(cpu::collective_kernel(OpKind::kAdd, DType::kF32), nullptr);
  EXPECT_EQ(cpu::collective_kernel(OpKind::kAllReduce, DType::kI32), nullptr);
}

TEST(CollectiveTest, GroupsHaveOneToMaxRanks) {
  EXPECT_EQ(HostRankGroup::create(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(HostRankGroup::create(HostRankGroup::kMaxRanks + 1).status().code(),
            StatusCode::kInvalidArgument);
  auto group = HostRankGroup::create(2).value();
  EXPECT_EQ(group->rank(1).rank(), 1);
  EXPECT_EQ(group->rank(1).size(), 2);
  EXPECT_EQ(group->rank(1).backend(), BackendId::kCpu);
}

}  // namespace
}  // namespace switchyard
