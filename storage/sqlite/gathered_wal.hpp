#pragma once
// A SQLite VFS over another one that gathers a transaction's WAL frames into few writes.
//
// SQLite writes each WAL frame in two calls, its 24-byte header and then its page, and a commit
// of a drain's cycle carries tens to hundreds of frames: two `pwrite` calls a frame cost about
// five times what one write of the same bytes does. This VFS keeps the frames a connection
// appends to its WAL in a buffer and writes them in pieces of up to 128 KiB, the most the parent
// VFS writes in one call, the last piece when the transaction commits.
//
// What keeps it safe: a WAL frame is seen by no one (another connection, another process,
// recovery after a crash) until the commit frame, the transaction's last, is written and the
// wal-index header then names it. The commit frame's header, and everything gathered before it,
// is written at once, and its page after it, before SQLite's write call returns; a failed write
// (a full disk) fails that call, so the commit fails as it would without the VFS. Any other
// call on the WAL file (a read, a sync, its size, a truncation, a write elsewhere) writes what
// is gathered first. The main database file and everything else pass straight through.
namespace surge::storage::sqlite {

// Registers (once, thread-safe) and names the gathering VFS over SQLite's default VFS; throws
// std::runtime_error if SQLite has none or refuses it.
const char* gathered_wal_vfs();

}  // namespace surge::storage::sqlite
