#include "tools/sink/recorder.hpp"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

namespace surge::sink {

namespace json = boost::json;

namespace {

void append_field(std::string& out, std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    out += field;
    return;
  }
  out += '"';
  for (const char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
}

json::object to_json(const std::map<verdict, std::uint64_t>& by_verdict) {
  json::object result;
  for (const verdict value : all_verdicts) {
    const auto found = by_verdict.find(value);
    result[to_string(value)] = found == by_verdict.end() ? 0 : found->second;
  }
  return result;
}

json::object to_json(const std::map<unsigned, std::uint64_t>& by_status) {
  json::object result;
  for (const auto& [status, count] : by_status) result[std::to_string(status)] = count;
  return result;
}

}  // namespace

std::string format_record(const request_record& record) {
  char arrival[32];
  std::snprintf(arrival, sizeof arrival, "%.6f", record.arrival);
  std::string line = arrival;
  line += ',';
  append_field(line, record.subscriber);
  line += ',';
  append_field(line, record.delivery_id);
  line += ',';
  append_field(line, record.attempt);
  line += ',';
  line += to_string(record.result);
  line += ',';
  line += std::to_string(record.status_sent);
  line += ',';
  append_field(line, record.event_type);
  line += ',';
  line += std::to_string(record.connection_id);
  line += ',';
  append_field(line, record.sni);
  line += ',';
  line += record.body_sha256;
  line += ',';
  line += std::to_string(record.batch_size);
  return line;
}

recorder::recorder(const std::string& path, std::chrono::milliseconds flush_interval) {
  if (!path.empty()) {
    file_ = std::fopen(path.c_str(), "w");
    if (file_ == nullptr)
      throw std::runtime_error("cannot open record file " + path + ": " + std::strerror(errno));
  }
  flusher_ = std::thread([this, flush_interval] { flush_loop(flush_interval); });
}

recorder::~recorder() { close(); }

void recorder::add(const request_record& record) {
  std::lock_guard lock(mutex_);
  if (file_ != nullptr) {
    buffer_ += format_record(record);
    buffer_ += '\n';
  }
  for (counters* target : {&total_, &by_subscriber_[record.subscriber]}) {
    ++target->requests;
    ++target->by_verdict[record.result];
    ++target->by_status[record.status_sent];
  }
  bad_content_type_ += record.bad_content_type;
  missing_delivery_headers_ += record.missing_delivery_headers;
  stale_timestamp_ += record.stale_timestamp;
  bad_batch_ += record.bad_batch;
  events_ += record.batch_size > 0 ? record.batch_size : 1;
}

void recorder::note_connection() {
  std::lock_guard lock(mutex_);
  ++connections_;
}

void recorder::note_streamed(std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  streamed_body_bytes_ += bytes;
}

std::string recorder::stats_json() const {
  std::lock_guard lock(mutex_);
  json::object root;
  root["requests"] = total_.requests;
  root["events"] = events_;
  root["connections"] = connections_;
  root["streamed_body_bytes"] = streamed_body_bytes_;
  root["by_verdict"] = to_json(total_.by_verdict);
  root["by_status"] = to_json(total_.by_status);
  root["problems"] = json::object{{"bad_content_type", bad_content_type_},
                                  {"missing_delivery_headers", missing_delivery_headers_},
                                  {"stale_timestamp", stale_timestamp_},
                                  {"bad_batch", bad_batch_}};
  json::object subscribers;
  for (const auto& [id, counts] : by_subscriber_) {
    json::object entry = to_json(counts.by_verdict);
    entry["requests"] = counts.requests;
    entry["by_status"] = to_json(counts.by_status);
    subscribers[id] = std::move(entry);
  }
  root["by_subscriber"] = std::move(subscribers);
  return json::serialize(root);
}

std::uint64_t recorder::requests() const {
  std::lock_guard lock(mutex_);
  return total_.requests;
}

void recorder::flush() {
  std::lock_guard lock(mutex_);
  flush_locked();
}

void recorder::close() {
  {
    std::lock_guard lock(mutex_);
    closing_ = true;
  }
  wake_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  std::lock_guard lock(mutex_);
  flush_locked();
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
  }
}

void recorder::flush_locked() {
  if (file_ == nullptr || buffer_.empty()) return;
  std::fwrite(buffer_.data(), 1, buffer_.size(), file_);
  std::fflush(file_);
  buffer_.clear();
}

void recorder::flush_loop(std::chrono::milliseconds interval) {
  std::unique_lock lock(mutex_);
  while (!closing_) {
    wake_.wait_for(lock, interval, [this] { return closing_; });
    flush_locked();
  }
}

}  // namespace surge::sink
