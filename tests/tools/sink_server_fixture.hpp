#pragma once
// A sink_server on 127.0.0.1 port 0 over a fresh queue file, and what its tests ask of it.
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>

#include "sink_test_support.hpp"
#include "tools/sink/sink_server.hpp"

namespace surge::sink::testing {

// Columns of the sink's record (tools/sink/recorder.hpp).
inline constexpr std::size_t column_subscriber = 1, column_delivery = 2, column_attempt = 3,
                             column_verdict = 4, column_status = 5, column_event = 6,
                             column_connection = 7, column_sni = 8, column_body_sha256 = 9;

class sink_server_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    queue_ = dir_.file("queue.db");
    create_queue(queue_, default_subscribers());
  }

  sink_server& start(const std::string& behaviours = "{}", int threads = 1) {
    sink_config config;
    config.db_path = queue_;
    config.record_path = dir_.file("record.csv");
    config.behaviours = behaviour_set::parse(behaviours);
    config.threads = threads;
    server_ = std::make_unique<sink_server>(std::move(config));
    server_->start();
    return *server_;
  }

  std::uint16_t port() const { return server_->port(); }

  static storage::subscriber_row subscriber(std::int64_t id) {
    for (const auto& row : default_subscribers())
      if (row.id == id) return row;
    return make_subscriber(id);
  }

  exchange post(const delivery& d, std::chrono::milliseconds timeout = std::chrono::seconds(5)) {
    return send_once(port(), signed_request(d, subscriber(d.subscriber_id)), timeout);
  }

  // Stops the server (flushing the record) and returns the CSV rows.
  std::vector<std::vector<std::string>> stop_and_read_record() {
    server_->stop();
    std::vector<std::vector<std::string>> rows;
    for (const auto& line : read_lines(dir_.file("record.csv"))) rows.push_back(split_csv(line));
    return rows;
  }

  std::string only_verdict() {
    const auto rows = stop_and_read_record();
    if (rows.size() != 1) return "rows: " + std::to_string(rows.size());
    return rows[0].at(column_verdict);
  }

  boost::json::object stats() {
    request_type request{http::verb::get, "/_sink/stats", 11};
    request.set(http::field::host, "127.0.0.1");
    const auto result = send_once(port(), request);
    if (!result.response) throw std::runtime_error("stats: " + result.error.message());
    return boost::json::parse(result.response->body()).as_object();
  }

  temp_dir dir_;
  std::string queue_;
  std::unique_ptr<sink_server> server_;
};

}  // namespace surge::sink::testing
