#include "actors/cluster/data_path.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "actors/cluster/tls_watch.hpp"
#include "core/error.hpp"
#include "core/wire/float16.hpp"

namespace troupe {
namespace {

constexpr uint8_t kHelloTaken = 1, kHelloRefused = 2;
constexpr uint64_t kTlsRecord = 16384;  // the most bytes one TLS record holds
// Written as they lie in memory: no padding, so no byte of them is left unset.
static_assert(sizeof(ValueHeader) == 72 + 8 * Shape::kMaxRank && sizeof(DataHello) == 32);

std::string errno_text(int e) { return std::strerror(e); }

using SslPtr = std::unique_ptr<SSL, decltype(&SSL_free)>;

// OpenSSL's queued errors of this thread, oldest first, as one line; the queue is left empty
// (a later call on this thread must not take them for its own).
std::string tls_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    out += (out.empty() ? "" : "; ") + std::string(reason ? reason : "error " + std::to_string(e));
  }
  return out;
}

// Why a call on `ssl` that failed (errno `saved` right after it) failed; "closed" for the peer's
// end of the connection, "no answer in time" when a socket timeout passed.
std::string tls_failure(SSL* ssl, int result, int saved) {
  const int e = SSL_get_error(ssl, result);
  std::string why = tls_errors();
  if (e == SSL_ERROR_ZERO_RETURN) return "closed";
  if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return "no answer in time";
  if (e == SSL_ERROR_SYSCALL && why.empty()) return saved ? errno_text(saved) : "closed";
  if (const long v = SSL_get_verify_result(ssl); v != X509_V_OK)
    why += fmt::format(" ({})", X509_verify_cert_error_string(v));
  return "TLS: " + (why.empty() ? "no detail from OpenSSL" : why);
}

struct AddrInfo {
  addrinfo* list = nullptr;
  ~AddrInfo() {
    if (list) ::freeaddrinfo(list);
  }
};

// The addresses of `host`:`port` (`passive`: to listen on; "0.0.0.0" then means every interface).
void resolve(const std::string& host, uint16_t port, bool passive, AddrInfo& out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  const std::string service = std::to_string(port);
  const char* name = passive && host == "0.0.0.0" ? nullptr : host.c_str();
  if (passive && !name) hints.ai_family = AF_INET;
  if (int e = ::getaddrinfo(name, service.c_str(), &hints, &out.list); e != 0)
    fail(ErrorCode::unavailable, "data path: cannot resolve {}: {}", host, ::gai_strerror(e));
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

void set_timeouts(int fd, std::chrono::milliseconds bound) {
  timeval tv{};
  tv.tv_sec = bound.count() / 1000;
  tv.tv_usec = (bound.count() % 1000) * 1000;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// Reads exactly n bytes (through `ssl` when not null); "" when done, else why not: "closed" for
// a clean end before the first byte.
std::string read_exactly(int fd, SSL* ssl, void* into, std::size_t n) {
  auto* p = static_cast<uint8_t*>(into);
  std::size_t got = 0;
  while (ssl && got < n) {
    ERR_clear_error();
    std::size_t r = 0;
    if (SSL_read_ex(ssl, p + got, n - got, &r) == 1) {
      got += r;
      continue;
    }
    const std::string why = tls_failure(ssl, 0, errno);
    return why == "closed" && got > 0 ? "the connection closed in the middle of a value" : why;
  }
  while (got < n) {
    ssize_t r = ::recv(fd, p + got, n - got, MSG_WAITALL);
    if (r > 0) {
      got += std::size_t(r);
    } else if (r == 0) {
      return got == 0 ? "closed" : "the connection closed in the middle of a value";
    } else if (errno != EINTR) {
      return errno == EAGAIN || errno == EWOULDBLOCK ? "no answer in time" : errno_text(errno);
    }
  }
  return {};
}

// Writes all n bytes (through `ssl` when not null), blocking; "" when done, else why not.
std::string write_exactly(int fd, SSL* ssl, const void* data, std::size_t n) {
  if (ssl) {
    ERR_clear_error();
    std::size_t w = 0;
    if (n == 0 || SSL_write_ex(ssl, data, n, &w) == 1) return {};  // all of it: no partial writes
    const std::string why = tls_failure(ssl, 0, errno);
    return why == "closed" ? errno_text(EPIPE) : why;
  }
  auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return errno_text(w == 0 ? EPIPE : errno);
    p += w;
    n -= std::size_t(w);
  }
  return {};
}

// Connects to one of `where`'s addresses within `bound`; -1 with `why` set when none answers.
int connect_within(const AddrInfo& where, std::chrono::milliseconds bound, std::string& why) {
  for (addrinfo* a = where.list; a; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = errno_text(errno);
      continue;
    }
    int r = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      r = ::poll(&p, 1, int(bound.count()));
      int error = 0;
      socklen_t len = sizeof error;
      if (r == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0) {
        r = 0;
      } else {
        why = r == 0 ? fmt::format("no connection within {} ms", bound.count()) : errno_text(error ? error : errno);
        r = -1;
      }
    } else if (r != 0) {
      why = errno_text(errno);
    }
    if (r == 0) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    ::close(fd);
  }
  return -1;
}

uint64_t random_secret() {
  std::random_device device;
  return (uint64_t(device()) << 32) | device();
}

// The tensor a header's bytes go into, or why the header makes none.
Tensor tensor_for(const ValueHeader& h, std::string& why) {
  if (h.dtype <= 0 || h.dtype > int32_t(DType::boolean)) {
    why = fmt::format("unknown dtype {}", h.dtype);
    return {};
  }
  if (h.rank > Shape::kMaxRank) {
    why = fmt::format("{} dimensions", int(h.rank));
    return {};
  }
  if (h.float16 && DType(h.dtype) != DType::float32) {
    why = "a float16 encoding of a tensor that is not float32";
    return {};
  }
  // The size is checked before anything is allocated: a forged shape must not ask for terabytes.
  std::vector<int64_t> dims(h.dims, h.dims + h.rank);
  uint64_t wire = h.float16 ? sizeof(uint16_t) : size_of(DType(h.dtype));
  for (int64_t d : dims) {
    if (d < 0) {
      why = fmt::format("a negative dimension {}", d);
      return {};
    }
    if (__builtin_mul_overflow(wire, uint64_t(d), &wire)) {
      why = fmt::format("a shape {} whose size overflows", Shape(dims).to_string());
      return {};
    }
  }
  if (wire != h.bytes) {
    why = fmt::format("{} bytes said for a {} tensor of shape {}", h.bytes, name_of(DType(h.dtype)),
                      Shape(dims).to_string());
    return {};
  }
  return Tensor(DType(h.dtype), Shape(dims));
}

}  // namespace

// ---- DataTls

DataTls::DataTls(const TlsFiles& files, const std::string& who) {
  auto refuse = [&](const std::string& what, const std::string& file) {
    const std::string why = tls_errors();
    if (context_) SSL_CTX_free(context_);
    fail(ErrorCode::invalid_argument, "{}: the data path cannot use TLS {} {}: {}", who, what, file,
         why.empty() ? "no detail from OpenSSL" : why);
  };
  ERR_clear_error();
  context_ = SSL_CTX_new(TLS_method());
  if (!context_) refuse("at all", "");
  SSL_CTX_set_min_proto_version(context_, TLS1_3_VERSION);
  // No tickets: the connecting side reads nothing after its hello's answer, and no session is resumed.
  SSL_CTX_set_num_tickets(context_, 0);
  // The sender's close() ends the socket without a close_notify (another thread may be writing):
  // an end between two values is then a clean one, as without TLS.
  SSL_CTX_set_options(context_, SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_verify(context_, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  if (SSL_CTX_load_verify_locations(context_, files.ca.c_str(), nullptr) != 1) refuse("CA", files.ca);
  if (SSL_CTX_use_certificate_chain_file(context_, files.certificate.c_str()) != 1)
    refuse("certificate", files.certificate);
  if (SSL_CTX_use_PrivateKey_file(context_, files.key.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(context_) != 1)
    refuse("key", files.key);
}

DataTls::~DataTls() { SSL_CTX_free(context_); }

namespace {

// OpenSSL's BIO over a socket, but writing with MSG_NOSIGNAL: OpenSSL's own writes with
// write(2), and a member process does not ignore SIGPIPE, so a peer that went would end this
// process instead of failing a write. No descriptor type: tls_watch.hpp leaves it alone.
int fd_of(BIO* b) { return int(reinterpret_cast<intptr_t>(BIO_get_data(b))); }

int bio_write(BIO* b, const char* data, int n) {
  BIO_clear_retry_flags(b);
  const ssize_t w = ::send(fd_of(b), data, std::size_t(n), MSG_NOSIGNAL);
  if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_write(b);
  return int(w);
}

int bio_read(BIO* b, char* into, int n) {
  BIO_clear_retry_flags(b);
  const ssize_t r = ::recv(fd_of(b), into, std::size_t(n), 0);
  if (r == 0) BIO_set_flags(b, BIO_FLAGS_IN_EOF);  // OpenSSL asks (BIO_eof) to tell an end from an error
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) BIO_set_retry_read(b);
  return int(r);
}

long bio_ctrl(BIO* b, int command, long, void*) {
  if (command == BIO_CTRL_FLUSH) return 1;
  if (command == BIO_CTRL_EOF) return BIO_test_flags(b, BIO_FLAGS_IN_EOF) ? 1 : 0;
  return 0;
}

BIO* socket_bio(int fd) {
  static BIO_METHOD* method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "troupe data connection");
    if (m) {
      BIO_meth_set_write(m, bio_write);
      BIO_meth_set_read(m, bio_read);
      BIO_meth_set_ctrl(m, bio_ctrl);
    }
    return m;
  }();
  BIO* b = method ? BIO_new(method) : nullptr;
  if (b) {
    BIO_set_data(b, reinterpret_cast<void*>(intptr_t(fd)));
    BIO_set_init(b, 1);
  }
  return b;
}

// A TLS session on `fd` as the connecting (`client`) or accepting side, its handshake done; null
// with `why` set when it fails.
SslPtr handshake(const DataTls& tls, int fd, bool client, std::string& why) {
  ERR_clear_error();
  SslPtr ssl(SSL_new(tls.context()), SSL_free);
  BIO* bio = ssl ? socket_bio(fd) : nullptr;
  if (!bio) {
    why = "TLS: " + tls_errors();
    return SslPtr(nullptr, SSL_free);
  }
  SSL_set_bio(ssl.get(), bio, bio);  // the session owns it
  const int r = client ? SSL_connect(ssl.get()) : SSL_accept(ssl.get());
  if (r == 1) return ssl;
  if (!client) {  // told as the cluster port's refusals are
    why = handshake_failure(ssl.get(), SSL_get_error(ssl.get(), r));
    ERR_clear_error();
    return SslPtr(nullptr, SSL_free);
  }
  why = tls_failure(ssl.get(), r, errno);
  if (why == "closed") why = "the connection closed during the TLS handshake (the other side has no TLS?)";
  return SslPtr(nullptr, SSL_free);
}

}  // namespace

// ---- DataSender

std::shared_ptr<DataSender> DataSender::connect(const std::string& host, uint16_t port, const DataHello& hello,
                                                std::chrono::milliseconds bound, Broken on_broken,
                                                const DataTls* tls) {
  const std::string where = fmt::format("{}:{}", host, port);
  AddrInfo addresses;
  resolve(host, port, false, addresses);
  std::string why;
  int fd = connect_within(addresses, bound, why);
  if (fd < 0) fail(ErrorCode::unavailable, "data path: cannot connect to {}: {}", where, why);
  set_nodelay(fd);
  set_timeouts(fd, bound);
  SslPtr ssl(nullptr, SSL_free);
  if (tls) ssl = handshake(*tls, fd, true, why);
  uint8_t answer = 0;
  if (why.empty()) why = write_exactly(fd, ssl.get(), &hello, sizeof hello);
  if (why.empty()) {
    // Under TLS 1.3 a listener that refuses this process's certificate says so only here.
    why = read_exactly(fd, ssl.get(), &answer, 1);
    if (why.empty() && answer != kHelloTaken) why = "it refused the hello (another process listens there now)";
    if (why == "closed") why = "it closed the connection without an answer (a listener that expects TLS?)";
  }
  if (!why.empty()) {
    ssl.reset();
    ::close(fd);
    fail(ErrorCode::unavailable, "data path: {} did not take the connection: {}", where, why);
  }
  set_timeouts(fd, std::chrono::milliseconds(0));  // writes block from now on (TCP's back-pressure)
  if (ssl) {  // written without blocking from the sending thread, where the socket takes it (write_tls)
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    SSL_set_mode(ssl.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  }
  return std::shared_ptr<DataSender>(new DataSender(fd, ssl.release(), where, std::move(on_broken)));
}

DataSender::DataSender(int fd, SSL* ssl, std::string where, Broken on_broken)
    : fd_(fd), ssl_(ssl), where_(std::move(where)), on_broken_(std::move(on_broken)) {}

DataSender::~DataSender() {
  close();
  if (writer_.joinable()) writer_.join();
  SSL_free(ssl_);
  ::close(fd_);
}

void DataSender::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    queue_.clear();
  }
  broken_.store(true, std::memory_order_release);
  ::shutdown(fd_, SHUT_RDWR);  // a blocked write returns
  wake_.notify_all();
  drained_.notify_all();
}

bool DataSender::flush(std::chrono::milliseconds bound) {
  std::unique_lock<std::mutex> lock(mutex_);
  drained_.wait_for(lock, bound, [this] { return stop_ || (queue_.empty() && !busy_); });
  return !stop_ && queue_.empty() && !busy_;
}

bool DataSender::write_tls(Frame& f, bool block, std::string& why) {
  const uint64_t total = sizeof(ValueHeader) + f.header.bytes;
  if (f.written == 0 && f.packed.empty() && f.header.bytes && total <= kTlsRecord) {
    f.packed.resize(total);
    std::memcpy(f.packed.data(), &f.header, sizeof(ValueHeader));
    std::memcpy(f.packed.data() + sizeof(ValueHeader), f.data, f.header.bytes);
  }
  while (f.written < total) {
    const uint8_t* at = nullptr;
    uint64_t n = total - f.written;
    if (!f.packed.empty()) {
      at = f.packed.data() + f.written;
    } else if (f.written < sizeof(ValueHeader)) {
      at = reinterpret_cast<const uint8_t*>(&f.header) + f.written;
      n = sizeof(ValueHeader) - f.written;
    } else {
      at = f.data + (f.written - sizeof(ValueHeader));
    }
    ERR_clear_error();
    std::size_t w = 0;
    if (SSL_write_ex(ssl_, at, n, &w) == 1) {  // whole records (partial writes on)
      f.written += w;
      continue;
    }
    const int saved = errno;
    if (SSL_get_error(ssl_, 0) != SSL_ERROR_WANT_WRITE) {
      why = tls_failure(ssl_, 0, saved);
      if (why == "closed") why = errno_text(EPIPE);
      return false;
    }
    // The socket is full; OpenSSL keeps the record it began, and the next call with these
    // bytes (from here or from the writer thread) goes on with it.
    ERR_clear_error();
    if (!block) return true;
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) {
      why = errno_text(errno);
      return false;
    }
  }
  return true;
}

bool DataSender::write(Frame& f, bool block, std::string& why) {
  if (ssl_) return write_tls(f, block, why);
  const uint64_t total = sizeof(ValueHeader) + f.header.bytes;
  while (f.written < total) {
    iovec parts[2];
    int n = 0;
    if (f.written < sizeof(ValueHeader)) {
      parts[n++] = {reinterpret_cast<uint8_t*>(&f.header) + f.written, sizeof(ValueHeader) - f.written};
      if (f.header.bytes) parts[n++] = {const_cast<uint8_t*>(f.data), f.header.bytes};
    } else {
      const uint64_t at = f.written - sizeof(ValueHeader);
      parts[n++] = {const_cast<uint8_t*>(f.data) + at, f.header.bytes - at};
    }
    msghdr m{};
    m.msg_iov = parts;
    m.msg_iovlen = std::size_t(n);
    ssize_t w = ::sendmsg(fd_, &m, MSG_NOSIGNAL | (block ? 0 : MSG_DONTWAIT));
    if (w > 0) {
      f.written += uint64_t(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else if (w < 0 && !block && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    } else {
      why = errno_text(w == 0 ? EPIPE : errno);
      return false;
    }
  }
  return true;
}

bool DataSender::send(const ValueHeader& header, std::shared_ptr<const void> owner, const uint8_t* data) {
  Frame f{header, std::move(owner), data, 0};
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (stop_) return false;
    if (!busy_ && queue_.empty()) {
      std::string why;
      if (write(f, false, why)) {
        if (f.written == sizeof(ValueHeader) + header.bytes) return true;
      } else {
        lock.unlock();
        fail_with(why);
        return false;
      }
    }
    queue_.push_back(std::move(f));
    if (!writer_.joinable()) writer_ = std::thread([this] { writer(); });
  }
  wake_.notify_one();
  return true;
}

void DataSender::writer() {
  ::pthread_setname_np(::pthread_self(), "troupe.data.out");  // as profiles and top show it
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Frame f = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::string why;
    const bool ok = write(f, true, why);
    f.owner.reset();  // the bytes are the kernel's now
    lock.lock();
    busy_ = false;
    if (queue_.empty()) drained_.notify_all();
    if (!ok) {
      lock.unlock();
      fail_with(why);
      return;
    }
  }
}

void DataSender::fail_with(const std::string& why) {
  if (broken_.exchange(true)) return;  // closed, or reported already
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    queue_.clear();
  }
  ::shutdown(fd_, SHUT_RDWR);
  wake_.notify_all();
  drained_.notify_all();
  if (on_broken_) on_broken_(fmt::format("the data connection to {} broke: {}", where_, why));
}

// ---- DataListener

DataListener::DataListener(const std::string& host, uint64_t incarnation, Deliver deliver, Lost lost,
                           std::chrono::milliseconds hello_bound, std::shared_ptr<const DataTls> tls,
                           Refused refused)
    : incarnation_(incarnation),
      secret_(random_secret()),
      tls_(std::move(tls)),
      on_refused_(std::move(refused)),
      deliver_(std::move(deliver)),
      lost_(std::move(lost)),
      hello_bound_(hello_bound) {
  AddrInfo addresses;
  resolve(host, 0, true, addresses);
  std::string why = "no address";
  for (addrinfo* a = addresses.list; a && listener_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = errno_text(errno);
      continue;
    }
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
      sockaddr_storage bound{};
      socklen_t len = sizeof bound;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
      port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                                : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      listener_ = fd;
    } else {
      why = errno_text(errno);
      ::close(fd);
    }
  }
  if (listener_ < 0) fail(ErrorCode::unavailable, "data path: cannot listen on {}: {}", host, why);
  acceptor_ = std::thread([this] { accept_loop(); });
}

DataListener::~DataListener() {
  stopping_.store(true);
  ::shutdown(listener_, SHUT_RDWR);  // accept() returns
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<Reader> readers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);  // every blocked read returns
    readers.swap(readers_);
  }
  for (auto& r : readers) r.thread.join();
  ::close(listener_);
}

void DataListener::accept_loop() {
  ::pthread_setname_np(::pthread_self(), "troupe.data.acc");
  while (!stopping_.load()) {
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    int fd = ::accept4(listener_, reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // shut down
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_.load()) {
      ::close(fd);
      return;
    }
    // Threads of connections that ended are joined here, so that they do not pile up.
    for (auto it = readers_.begin(); it != readers_.end();)
      if (it->done->load()) {
        it->thread.join();
        it = readers_.erase(it);
      } else {
        ++it;
      }
    fds_.push_back(fd);
    auto done = std::make_shared<std::atomic<bool>>(false);
    readers_.push_back({std::thread([this, fd, done, peer = address_text(from)] {
                          serve(fd, peer);
                          std::lock_guard<std::mutex> lock(mutex_);
                          std::erase(fds_, fd);
                          ::close(fd);
                          done->store(true);
                        }),
                        done});
  }
}

void DataListener::serve(int fd, const std::string& peer) {
  ::pthread_setname_np(::pthread_self(), "troupe.data.in");
  set_nodelay(fd);
  set_timeouts(fd, hello_bound_);  // a connection that says nothing is not waited for
  std::string why;
  SslPtr ssl(nullptr, SSL_free);
  if (tls_) ssl = handshake(*tls_, fd, false, why);
  const bool secured = why.empty();  // a refusal can be told to the sender
  if (!secured) why = "its TLS handshake failed: " + why;
  DataHello hello;
  if (why.empty()) why = hello_refusal(read_exactly(fd, ssl.get(), &hello, sizeof hello), hello);
  const uint8_t answer = why.empty() ? kHelloTaken : kHelloRefused;
  if (!why.empty()) {  // counted and told before the sender can learn of it
    refused_.fetch_add(1);
    if (on_refused_) on_refused_(peer, why);
  }
  if (secured) write_exactly(fd, ssl.get(), &answer, 1);
  if (!why.empty()) {
    ::shutdown(fd, SHUT_RDWR);
    return;
  }
  set_timeouts(fd, std::chrono::milliseconds(0));
  read_values(fd, ssl.get(), hello.sender, why);
  ::shutdown(fd, SHUT_RDWR);
  const bool clean = why == "closed";
  if (!stopping_.load() && lost_) lost_(hello.sender, clean ? "the sender closed the data connection" : why, clean);
}

// Why a hello read with `read` ("" when it came whole) is refused; "" if it is taken.
std::string DataListener::hello_refusal(const std::string& read, const DataHello& hello) const {
  if (read == "closed") return "it closed the connection before its hello";
  if (read == "no answer in time") return fmt::format("no hello within {} ms", hello_bound_.count());
  if (!read.empty()) return read;
  if (hello.magic != DataHello::kMagic || hello.version != DataHello::kVersion)
    return "it does not speak this data path (a hello of another program or version)";
  if (hello.receiver != incarnation_)
    return fmt::format("its hello is for incarnation {:#x} of this task, which is {:#x} (one from before a restart)",
                       hello.receiver, incarnation_);
  if (hello.secret != secret_) return "its hello has the wrong secret";
  return {};
}

// Reads values until the connection ends or its bytes make no value; `why` says which.
void DataListener::read_values(int fd, SSL* ssl, uint64_t sender, std::string& why) {
  std::vector<uint16_t> half;  // a float16 value's bytes, converted from here
  for (;;) {
    ReceivedValue v;
    v.sender = sender;
    why = read_exactly(fd, ssl, &v.header, sizeof v.header);
    if (why.empty() && v.header.magic != ValueHeader::kMagic) why = "bytes that are no value's header";
    if (why.empty() && v.header.kind > ValueHeader::ring_chunk)
      why = fmt::format("a value of unknown kind {}", int(v.header.kind));
    if (why.empty() && !v.header.dead) {
      try {
        v.tensor = tensor_for(v.header, why);
      } catch (const std::exception& e) {  // more than this process can allocate
        why = e.what();
      }
      if (why.empty() && v.header.float16) {
        half.resize(v.header.bytes / 2);
        why = read_exactly(fd, ssl, half.data(), v.header.bytes);
        if (why.empty()) float16_to_float32(half.data(), v.tensor.data<float>(), half.size());
      } else if (why.empty()) {
        why = read_exactly(fd, ssl, v.tensor.raw_data(), v.header.bytes);
      }
      if (why == "closed") why = "the connection closed in the middle of a value";
    }
    if (!why.empty()) return;
    try {
      deliver_(std::move(v));
    } catch (const std::exception& e) {
      why = fmt::format("a value could not be delivered: {}", e.what());
      return;
    }
  }
}

}  // namespace troupe
