#!/usr/bin/env python3
"""A TCP proxy in front of a Unix socket that holds every chunk for a fixed delay each way: a
PostgreSQL server on another host, as `bench/e2e.py --pg-delay-ms` puts it in front of the drain's
connection. Loopback has no netem here (the kernel has no qdisc modules), so the delay is added
in user space; the proxy's own CPU runs on the same two cores as everything else, which is why
it is only used for A/B comparisons in one run.

    bench/delay_proxy.py --unix /tmp/dir/.s.PGSQL.5432 --delay-ms 0.25 --port-file port.txt

Prints nothing; writes the port it listens on (127.0.0.1) to --port-file once it listens."""
import argparse
import asyncio
from pathlib import Path


async def pump(reader, writer, delay):
    loop = asyncio.get_running_loop()
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            # Each chunk leaves `delay` after it arrived; chunks keep their order since the delay
            # is the same for all of them.
            loop.call_later(delay, writer.write, data)
    except ConnectionError:
        pass
    finally:
        loop.call_later(delay, writer.close)


async def serve(unix_path, delay, port_file):
    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_unix_connection(unix_path)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pump(client_reader, server_writer, delay),
                             pump(server_reader, client_writer, delay))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    Path(port_file).write_text(f"{port}\n")
    async with server:
        await server.serve_forever()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unix", required=True, help="the Unix socket to forward to")
    parser.add_argument("--delay-ms", type=float, required=True, help="added each way")
    parser.add_argument("--port-file", required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.unix, args.delay_ms / 1000.0, args.port_file))


if __name__ == "__main__":
    main()
