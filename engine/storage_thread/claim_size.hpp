#pragma once
// How many rows one claim may ask for. A claim the database cancels at its statement timeout (the
// role's, or ours on a slow server) would be cancelled again at the same size, so the next one
// asks for half as many rows, down to one; each claim that fits lets the size double, until it is
// unbounded again. Pure state: the storage core says what happened, and caps each claim here.
#include <cstddef>
#include <cstdint>
#include <span>

#include "storage/claims.hpp"

namespace surge::engine {

class claim_size {
 public:
  // Past this many rows a claim that fits is no longer capped.
  static constexpr std::size_t uncapped_from = std::size_t{1} << 20;

  // The most rows one claim asks for; SIZE_MAX while no claim has timed out.
  std::size_t most_rows() const { return cap_; }
  bool capped() const { return cap_ != SIZE_MAX; }

  // Cuts `demand` to the cap, earlier entries first.
  void cap(std::span<storage::subscriber_demand> demand) const;
  // A claim for `demand` was cancelled by the statement timeout: the next asks for half of it.
  void timed_out(std::span<const storage::subscriber_demand> demand);
  // A claim fitted within the statement timeout: the next may ask for twice as many.
  void fitted();

 private:
  std::size_t cap_ = SIZE_MAX;
};

}  // namespace surge::engine
