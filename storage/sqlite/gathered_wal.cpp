#include "storage/sqlite/gathered_wal.hpp"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include <sqlite3.h>

namespace surge::storage::sqlite {

namespace {

// The WAL file format (sqlite.org/fileformat2.html): a 32-byte file header, then frames, each
// a 24-byte header and a page; bytes 4 to 7 of a frame's header, big-endian, are the database's
// size in pages after a commit frame and zero in every other frame.
constexpr int frame_header_bytes = 24;
constexpr sqlite3_int64 file_header_bytes = 32;

bool is_commit_frame_header(const void* data, int bytes, sqlite3_int64 offset) {
  if (bytes != frame_header_bytes || offset < file_header_bytes) return false;
  const auto* header = static_cast<const unsigned char*>(data);
  return (header[4] | header[5] | header[6] | header[7]) != 0;
}

// A transaction larger than this is written in pieces of it. SQLite's unix VFS writes at most
// 128 KiB - 1 bytes a call (it masks the length to 17 bits: it never writes more than a page),
// so a piece is 31 frames of 4 KiB pages, and costs a 62nd of what writing them one by one does.
constexpr std::size_t gather_limit = 0x1ffff;

// What one WAL file handle has gathered and not yet written.
struct gathered_frames {
  std::vector<unsigned char> bytes;
  sqlite3_int64 offset = 0;  // where bytes[0] goes in the file
  // The commit frame's header went out, so its page must too before the write returns.
  bool write_next_through = false;
};

// SQLite hands every method the sqlite3_file it allocated, szOsFile bytes: this struct, then
// the parent VFS's own file.
struct gathering_file {
  sqlite3_file base;  // first, so that SQLite's pointer is this struct's
  sqlite3_io_methods methods;
  sqlite3_file* real;
  gathered_frames* wal;  // null for any file but a WAL
};

gathering_file& as_gathering(sqlite3_file* file) {
  return *reinterpret_cast<gathering_file*>(file);
}
sqlite3_file* real_of(sqlite3_file* file) { return as_gathering(file).real; }

int write_through(sqlite3_file* file, const void* data, int bytes, sqlite3_int64 offset) {
  sqlite3_file* real = real_of(file);
  return real->pMethods->xWrite(real, data, bytes, offset);
}

// Writes what the handle has gathered, and forgets it whether or not the write succeeded: a
// failed write fails the transaction, which SQLite then rolls back.
int write_gathered(sqlite3_file* file) {
  gathered_frames* wal = as_gathering(file).wal;
  if (wal == nullptr || wal->bytes.empty()) return SQLITE_OK;
  const int rc =
      write_through(file, wal->bytes.data(), static_cast<int>(wal->bytes.size()), wal->offset);
  wal->bytes.clear();
  return rc;
}

int gather_write(sqlite3_file* file, const void* data, int bytes, sqlite3_int64 offset) {
  gathered_frames* wal = as_gathering(file).wal;
  if (wal == nullptr) return write_through(file, data, bytes, offset);
  if (wal->write_next_through) {
    wal->write_next_through = false;
    return write_through(file, data, bytes, offset);
  }
  const auto size = static_cast<std::size_t>(bytes);
  if (!wal->bytes.empty() &&
      (offset != wal->offset + static_cast<sqlite3_int64>(wal->bytes.size()) ||
       wal->bytes.size() + size > gather_limit)) {
    if (const int rc = write_gathered(file); rc != SQLITE_OK) return rc;
  }
  if (size > gather_limit) return write_through(file, data, bytes, offset);
  try {
    if (wal->bytes.empty()) {
      wal->bytes.reserve(gather_limit);
      wal->offset = offset;
    }
    const auto* begin = static_cast<const unsigned char*>(data);
    wal->bytes.insert(wal->bytes.end(), begin, begin + size);
  } catch (const std::bad_alloc&) {
    if (const int rc = write_gathered(file); rc != SQLITE_OK) return rc;
    return write_through(file, data, bytes, offset);
  }
  if (!is_commit_frame_header(data, bytes, offset)) return SQLITE_OK;
  const int rc = write_gathered(file);
  wal->write_next_through = rc == SQLITE_OK;
  return rc;
}

int close_file(sqlite3_file* file) {
  const int gathered = write_gathered(file);
  sqlite3_file* real = real_of(file);
  const int closed = real->pMethods->xClose(real);
  delete as_gathering(file).wal;
  as_gathering(file).wal = nullptr;
  return gathered != SQLITE_OK ? gathered : closed;
}

int read_file(sqlite3_file* file, void* data, int bytes, sqlite3_int64 offset) {
  if (const int rc = write_gathered(file); rc != SQLITE_OK) return rc;
  sqlite3_file* real = real_of(file);
  return real->pMethods->xRead(real, data, bytes, offset);
}

int truncate_file(sqlite3_file* file, sqlite3_int64 size) {
  if (const int rc = write_gathered(file); rc != SQLITE_OK) return rc;
  sqlite3_file* real = real_of(file);
  return real->pMethods->xTruncate(real, size);
}

int sync_file(sqlite3_file* file, int flags) {
  if (const int rc = write_gathered(file); rc != SQLITE_OK) return rc;
  sqlite3_file* real = real_of(file);
  return real->pMethods->xSync(real, flags);
}

int file_size(sqlite3_file* file, sqlite3_int64* size) {
  if (const int rc = write_gathered(file); rc != SQLITE_OK) return rc;
  sqlite3_file* real = real_of(file);
  return real->pMethods->xFileSize(real, size);
}

int lock_file(sqlite3_file* file, int level) {
  sqlite3_file* real = real_of(file);
  return real->pMethods->xLock(real, level);
}

int unlock_file(sqlite3_file* file, int level) {
  sqlite3_file* real = real_of(file);
  return real->pMethods->xUnlock(real, level);
}

int check_reserved_lock(sqlite3_file* file, int* reserved) {
  sqlite3_file* real = real_of(file);
  return real->pMethods->xCheckReservedLock(real, reserved);
}

int file_control(sqlite3_file* file, int op, void* argument) {
  if (const int rc = write_gathered(file); rc != SQLITE_OK) return rc;
  sqlite3_file* real = real_of(file);
  return real->pMethods->xFileControl(real, op, argument);
}

int sector_size(sqlite3_file* file) {
  sqlite3_file* real = real_of(file);
  return real->pMethods->xSectorSize(real);
}

int device_characteristics(sqlite3_file* file) {
  sqlite3_file* real = real_of(file);
  return real->pMethods->xDeviceCharacteristics(real);
}

int shm_map(sqlite3_file* file, int page, int page_size, int extend, void volatile** mapped) {
  sqlite3_file* real = real_of(file);
  return real->pMethods->xShmMap(real, page, page_size, extend, mapped);
}

int shm_lock(sqlite3_file* file, int offset, int count, int flags) {
  sqlite3_file* real = real_of(file);
  return real->pMethods->xShmLock(real, offset, count, flags);
}

void shm_barrier(sqlite3_file* file) {
  sqlite3_file* real = real_of(file);
  real->pMethods->xShmBarrier(real);
}

int shm_unmap(sqlite3_file* file, int delete_flag) {
  sqlite3_file* real = real_of(file);
  return real->pMethods->xShmUnmap(real, delete_flag);
}

int fetch(sqlite3_file* file, sqlite3_int64 offset, int bytes, void** page) {
  if (const int rc = write_gathered(file); rc != SQLITE_OK) return rc;
  sqlite3_file* real = real_of(file);
  return real->pMethods->xFetch(real, offset, bytes, page);
}

int unfetch(sqlite3_file* file, sqlite3_int64 offset, void* page) {
  sqlite3_file* real = real_of(file);
  return real->pMethods->xUnfetch(real, offset, page);
}

constexpr sqlite3_io_methods gathering_methods = {3,
                                                  close_file,
                                                  read_file,
                                                  gather_write,
                                                  truncate_file,
                                                  sync_file,
                                                  file_size,
                                                  lock_file,
                                                  unlock_file,
                                                  check_reserved_lock,
                                                  file_control,
                                                  sector_size,
                                                  device_characteristics,
                                                  shm_map,
                                                  shm_lock,
                                                  shm_barrier,
                                                  shm_unmap,
                                                  fetch,
                                                  unfetch};

// The registered VFS: SQLite's struct, and the parent it forwards to.
struct gathering_vfs {
  sqlite3_vfs vfs;
  sqlite3_vfs* parent;
  std::string name;
};

sqlite3_vfs* parent_of(sqlite3_vfs* vfs) {
  return static_cast<gathering_vfs*>(vfs->pAppData)->parent;
}

int open_file(sqlite3_vfs* vfs, sqlite3_filename name, sqlite3_file* file, int flags,
              int* out_flags) {
  auto& gathering = as_gathering(file);
  file->pMethods = nullptr;
  gathering.wal = nullptr;
  gathering.real =
      reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + sizeof(gathering_file));
  sqlite3_vfs* parent = parent_of(vfs);
  const int rc = parent->xOpen(parent, name, gathering.real, flags, out_flags);
  if (rc != SQLITE_OK) {
    // SQLite would close a file whose methods are set; ours are not, so close the parent's here.
    if (gathering.real->pMethods != nullptr) gathering.real->pMethods->xClose(gathering.real);
    return rc;
  }
  gathering.methods = gathering_methods;
  gathering.methods.iVersion =
      std::min(gathering.methods.iVersion, gathering.real->pMethods->iVersion);
  // A WAL whose buffer cannot be had is written through, as SQLite would write it.
  if ((flags & SQLITE_OPEN_WAL) != 0) gathering.wal = new (std::nothrow) gathered_frames;
  file->pMethods = &gathering.methods;
  return SQLITE_OK;
}

int delete_file(sqlite3_vfs* vfs, const char* name, int sync_directory) {
  return parent_of(vfs)->xDelete(parent_of(vfs), name, sync_directory);
}
int access_file(sqlite3_vfs* vfs, const char* name, int flags, int* result) {
  return parent_of(vfs)->xAccess(parent_of(vfs), name, flags, result);
}
int full_pathname(sqlite3_vfs* vfs, const char* name, int size, char* out) {
  return parent_of(vfs)->xFullPathname(parent_of(vfs), name, size, out);
}
void* dl_open(sqlite3_vfs* vfs, const char* name) {
  return parent_of(vfs)->xDlOpen(parent_of(vfs), name);
}
void dl_error(sqlite3_vfs* vfs, int size, char* out) {
  parent_of(vfs)->xDlError(parent_of(vfs), size, out);
}
void (*dl_sym(sqlite3_vfs* vfs, void* handle, const char* symbol))(void) {
  return parent_of(vfs)->xDlSym(parent_of(vfs), handle, symbol);
}
void dl_close(sqlite3_vfs* vfs, void* handle) { parent_of(vfs)->xDlClose(parent_of(vfs), handle); }
int randomness(sqlite3_vfs* vfs, int size, char* out) {
  return parent_of(vfs)->xRandomness(parent_of(vfs), size, out);
}
int sleep_for(sqlite3_vfs* vfs, int microseconds) {
  return parent_of(vfs)->xSleep(parent_of(vfs), microseconds);
}
int current_time(sqlite3_vfs* vfs, double* now) {
  return parent_of(vfs)->xCurrentTime(parent_of(vfs), now);
}
int last_error(sqlite3_vfs* vfs, int size, char* out) {
  return parent_of(vfs)->xGetLastError(parent_of(vfs), size, out);
}
int current_time_int64(sqlite3_vfs* vfs, sqlite3_int64* now) {
  return parent_of(vfs)->xCurrentTimeInt64(parent_of(vfs), now);
}
int set_system_call(sqlite3_vfs* vfs, const char* name, sqlite3_syscall_ptr call) {
  return parent_of(vfs)->xSetSystemCall(parent_of(vfs), name, call);
}
sqlite3_syscall_ptr get_system_call(sqlite3_vfs* vfs, const char* name) {
  return parent_of(vfs)->xGetSystemCall(parent_of(vfs), name);
}
const char* next_system_call(sqlite3_vfs* vfs, const char* name) {
  return parent_of(vfs)->xNextSystemCall(parent_of(vfs), name);
}

// Lives as long as the process: SQLite keeps a registered VFS's pointer.
void register_over(sqlite3_vfs* parent, const std::string& name) {
  auto* gathering = new gathering_vfs{};
  gathering->parent = parent;
  gathering->name = name;
  sqlite3_vfs& vfs = gathering->vfs;
  // Version 3 at most, the newest this code forwards; the parent's methods of a newer one are
  // not offered.
  vfs.iVersion = std::min(parent->iVersion, 3);
  vfs.szOsFile = static_cast<int>(sizeof(gathering_file)) + parent->szOsFile;
  vfs.mxPathname = parent->mxPathname;
  vfs.zName = gathering->name.c_str();
  vfs.pAppData = gathering;
  vfs.xOpen = open_file;
  vfs.xDelete = delete_file;
  vfs.xAccess = access_file;
  vfs.xFullPathname = full_pathname;
  vfs.xDlOpen = dl_open;
  vfs.xDlError = dl_error;
  vfs.xDlSym = dl_sym;
  vfs.xDlClose = dl_close;
  vfs.xRandomness = randomness;
  vfs.xSleep = sleep_for;
  vfs.xCurrentTime = current_time;
  vfs.xGetLastError = last_error;
  vfs.xCurrentTimeInt64 = current_time_int64;
  vfs.xSetSystemCall = set_system_call;
  vfs.xGetSystemCall = get_system_call;
  vfs.xNextSystemCall = next_system_call;
  if (sqlite3_vfs_register(&vfs, 0) != SQLITE_OK) {
    delete gathering;
    throw std::runtime_error("cannot register the SQLite VFS " + name);
  }
}

}  // namespace

const char* gathered_wal_vfs() {
  static const char* const name = [] {
    static const std::string gathered = "surge-gathered-wal";
    sqlite3_vfs* parent = sqlite3_vfs_find(nullptr);
    if (parent == nullptr) throw std::runtime_error("SQLite has no default VFS");
    register_over(parent, gathered);
    return gathered.c_str();
  }();
  return name;
}

}  // namespace surge::storage::sqlite
