#pragma once
// How the engine's coroutines await Asio operations.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace surge::engine {

// An operation's results as a tuple, error included, rather than an exception. Through
// `deferred`, `co_await` starts the operation itself; `use_awaitable` first allocates and runs
// a coroutine frame only to initiate it, one per operation awaited, and a burst of attempts
// outruns Asio's two-block frame cache, so each of those frames is a malloc and a free.
inline constexpr auto use_tuple = boost::asio::as_tuple(boost::asio::deferred);

// For what `deferred` cannot start: Asio's `||` and `&&` operators, which combine awaitables,
// and Beast's TLS stream and its `async_connect` over a range of endpoints, which Boost 1.81
// declares through `async_result<Token>::return_type`, a name `deferred` lacks.
inline constexpr auto awaitable_tuple = boost::asio::as_tuple(boost::asio::use_awaitable);

}  // namespace surge::engine
