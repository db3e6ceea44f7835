#include "switchyard/collective.h"

#include <fmt/format.h>

#include <utility>

namespace switchyard {

Result<std::unique_ptr<HostRankGroup>> HostRankGroup::create(int ranks) {
  if (ranks < 1 || ranks > kMaxRanks) {
    return invalid_argument_error(
        fmt::format("a rank group has 1 to {} ranks, not {}", kMaxRanks, ranks));
  }
  return std::unique_ptr<HostRankGroup>(new HostRankGroup(ranks));
}

HostRankGroup::HostRankGroup(int ranks) : published_(static_cast<std::size_t>(ranks)) {
  ranks_.reserve(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) ranks_.push_back(HostCommunicator(*this, r));
}

HostCommunicator& HostRankGroup::rank(int r) {
  SWITCHYARD_CHECK(r >= 0 && r < size());
  return ranks_[static_cast<std::size_t>(r)];
}

void HostRankGroup::abort(const Status& why) {
  {
    std::lock_guard lock(mutex_);
    if (aborted_) return;
    aborted_ = true;
    abort_status_ = why.is_ok() ? failed_precondition_error("the rank group was aborted") : why;
  }
  arrived_.notify_all();
}

void HostRankGroup::reset() {
  std::lock_guard lock(mutex_);
  aborted_ = false;
  abort_status_ = Status::ok();
  waiting_ = 0;
}

bool HostRankGroup::aborted() const {
  std::lock_guard lock(mutex_);
  return aborted_;
}

// A generation barrier: the last rank to arrive opens the current generation.
Status HostRankGroup::wait_for_all() {
  std::unique_lock lock(mutex_);
  if (aborted_) return abort_status_;
  const std::uint64_t generation = generation_;
  if (++waiting_ == size()) {
    waiting_ = 0;
    ++generation_;
    lock.unlock();
    arrived_.notify_all();
    return Status::ok();
  }
  arrived_.wait(lock, [&] { return generation_ != generation || aborted_; });
  // A generation that opened before the abort still counts: every rank passed it.
  if (generation_ != generation) return Status::ok();
  return abort_status_;
}

int HostCommunicator::size() const { return group_->size(); }

void HostCommunicator::abort(const Status& why) { group_->abort(why); }

Status HostCommunicator::publish(std::span<const void* const> buffers) {
  group_->published_[static_cast<std::size_t>(rank_)].assign(buffers.begin(), buffers.end());
  return group_->wait_for_all();
}

std::span<const void* const> HostCommunicator::published(int rank) const {
  SWITCHYARD_CHECK(rank >= 0 && rank < size());
  return group_->published_[static_cast<std::size_t>(rank)];
}

Status HostCommunicator::barrier() { return group_->wait_for_all(); }

}  // namespace switchyard
