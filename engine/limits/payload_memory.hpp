#pragma once
// A shard's part of --max-payload-memory: the payload bytes of the rows it buffers and has in
// flight, and those the rows it asked the storage thread for are expected to bring, each
// subscriber's counted at its own rows' weight. Claims ask for no more rows than fit. A
// subscriber holding more than a small floor takes no more than an even part of the share among
// those that do, so partners whose requests hang cannot hold all of it between them while a
// neighbour waits for its rows. Pure state; the shard core says what was held, asked and
// answered.
#include <cstddef>
#include <cstdint>

namespace surge::engine {

// What one subscriber holds, kept with the subscriber.
struct subscriber_payload {
  std::int64_t held_bytes = 0;  // its buffered and in-flight rows' payloads
  double pending_bytes = 0;     // what its rows asked for are expected to bring
  double bytes_per_row = 0;     // what its rows weigh on average; 0: none seen yet
};

class payload_memory {
 public:
  // What every subscriber may always hold, however much the others hold: a partner whose
  // requests hang must not keep its neighbours from their rows. The drain's payloads may so
  // exceed --max-payload-memory by this much per subscriber.
  static constexpr double own_floor = 64 * 1024;

  // `share_bytes`: this shard's part of the drain's payload memory. `max_row_bytes`: the most a
  // row may carry, the weight a row is counted at until an answer shows what rows carry here.
  payload_memory(double share_bytes, std::size_t max_row_bytes);

  // Payload bytes a subscriber now holds more (a claimed row taken in) or less (negative: a row
  // sent and done, given back or dead-lettered).
  void hold(subscriber_payload& sub, std::int64_t bytes);
  // A claimed row of `bytes` taken into the subscriber's queue: held, and its rows' weight
  // moved towards it.
  void take_row(subscriber_payload& sub, std::int64_t bytes);
  // An answer brought `rows` rows of `bytes` in all: the shard's estimate for subscribers whose
  // rows have not been seen moves to it (the first answer replaces the cautious guess).
  void answered(int rows, std::int64_t bytes);

  // `rows` asked for the subscriber: counted at its weight until the answer comes.
  void asked(subscriber_payload& sub, int rows);
  // The answer to what the subscriber asked for came (whatever it brought).
  void asked_answered(subscriber_payload& sub);
  // Nothing is asked of the storage thread any more: no rounding is left over.
  void nothing_asked() { pending_bytes_ = 0; }

  // The share less what is held and asked for.
  double free_bytes() const;
  // How many rows the subscriber may ask for with `free_bytes` left of the share: at least one
  // when the shard holds nothing, so the drain never stalls however small the share.
  int rows_within(const subscriber_payload& sub, double free_bytes) const;
  // What one of its rows is counted at.
  double row_weight(const subscriber_payload& sub) const;

  std::int64_t held_bytes() const { return held_bytes_; }

 private:
  double share_bytes_;
  double max_row_bytes_;
  std::int64_t held_bytes_ = 0;
  double pending_bytes_ = 0;
  int heavy_subscribers_ = 0;  // holding more than own_floor
  double bytes_per_row_;       // for subscribers whose rows have not been seen
};

}  // namespace surge::engine
