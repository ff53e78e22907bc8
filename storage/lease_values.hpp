#pragma once
// The locked_until values one claimer writes: each doubles as the fence of
// the outcome writes for its rows, whichever database holds them.
#include <cstdint>
#include <random>

namespace surge::storage {

// A lease value must never equal a locked_until written by anyone else for the same row. The
// other drainer writes `now + 30` from its own clock (whole seconds, or whatever fraction its
// clock gives); two claimers whose clocks agree would write equal values and each could then
// complete rows the other has re-claimed. A nonce in the microsecond digits makes our values
// differ from whole-second or whole-millisecond leases and from other Surge processes (1 in 999
// per millisecond otherwise). Strictly increasing values keep our own claims apart too: a stale
// outcome for an earlier lease of a row must not match a later lease of the same row, even within
// one millisecond or after the wall clock stepped back.
class lease_values {
 public:
  lease_values() : lease_values(random_nonce()) {}
  // `nonce_micros` in 1..999; chosen by a test, random otherwise.
  explicit lease_values(int nonce_micros) : nonce_(nonce_micros * 1e-6) {}
  double next(double now, double seconds);

 private:
  static int random_nonce() {
    std::random_device entropy;
    return std::uniform_int_distribution<int>(1, 999)(entropy);
  }
  double nonce_ = 0;
  std::int64_t last_millis_ = 0;
};

}  // namespace surge::storage
