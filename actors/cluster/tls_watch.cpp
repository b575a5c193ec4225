#include "actors/cluster/tls_watch.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "actors/cluster/cluster_spec.hpp"
#include "core/report.hpp"

namespace troupe {
namespace {

struct Handshake {
  std::chrono::steady_clock::time_point started;
  std::string peer;  // taken at the first call: a peer that has left has no address
  bool reported = false;
};

std::atomic<bool> armed{false};  // a network layer with TLS was configured in this process
std::mutex watch_mutex;  // guards the two below; never held while calling out
std::unordered_map<const SSL*, Handshake> handshakes;
std::function<void(const std::string&)> event_log;

// Refusals of the same kind from the same host (a peer that retries every 100 ms): the first is
// told in full, the rest counted and told once per kRepeatWindow, as one line.
struct Repeats {
  std::chrono::steady_clock::time_point told;
  int64_t since = 0;  // refusals since the last line
};
std::unordered_map<std::string, Repeats> repeats;  // by kind, host and reason; guarded by watch_mutex

void emit(const std::string& line) {
  std::function<void(const std::string&)> log;
  {
    std::lock_guard<std::mutex> lock(watch_mutex);
    log = event_log;
  }
  if (log) log(line);
  else report_to_stderr(line);
}

}  // namespace

std::string address_text(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (a.ss_family == AF_INET) {
    auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
    port = ntohs(v4->sin_port);
  } else {
    auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
    port = ntohs(v6->sin6_port);
  }
  return TaskAddress{host, port}.to_string();  // "[v6]:port" for IPv6
}

std::string refusal_line(const std::string& what, const std::string& peer, const std::string& reason) {
  const auto colon = peer.rfind(':');
  const std::string host = colon == std::string::npos ? peer : peer.substr(0, colon);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(watch_mutex);
  auto [it, first] = repeats.try_emplace(what + '\n' + host + '\n' + reason, Repeats{now, 0});
  if (first) return fmt::format("{} {}: {}", what, peer, reason);
  ++it->second.since;
  if (now - it->second.told < kRepeatWindow) return {};
  std::string line = fmt::format("{} {} {} more time(s) in the last {:.0f} s (the newest from {}): {}", what, host,
                                 it->second.since, std::chrono::duration<double>(now - it->second.told).count(), peer,
                                 reason);
  it->second = {now, 0};
  return line;
}

namespace {

// One refusal: `what` ("refused a TLS connection from"), the peer "host:port", and why.
void emit_refusal(const std::string& what, const std::string& peer, const std::string& reason) {
  if (std::string line = refusal_line(what, peer, reason); !line.empty()) emit(line);
}

std::string peer_of(SSL* ssl) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  const int fd = SSL_get_fd(ssl);
  if (fd < 0 || ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "an unknown peer";
  return address_text(a);
}

// Why a handshake failed, from what OpenSSL left (its error queue stays as it is for CAF).
std::string why(SSL* ssl, int error) {
  const long verified = SSL_get_verify_result(ssl);
  if (verified != X509_V_OK)
    return fmt::format("its certificate is not from this cluster's CA ({})", X509_verify_cert_error_string(verified));
  if (const unsigned long e = ERR_peek_last_error()) {
    const char* reason = ERR_reason_error_string(e);
    const std::string text = reason ? reason : fmt::format("OpenSSL error {:#x}", e);
    if (ERR_GET_REASON(e) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) return "it has no certificate (" + text + ")";
    // An alert from the peer: it refused this process's certificate (another cluster's CA?).
    if (ERR_GET_REASON(e) >= SSL_AD_REASON_OFFSET)
      return "it refused this process's certificate, as a process of another cluster would (" + text + ")";
    if (ERR_GET_REASON(e) == SSL_R_WRONG_VERSION_NUMBER || ERR_GET_REASON(e) == SSL_R_HTTP_REQUEST ||
        ERR_GET_REASON(e) == SSL_R_PACKET_LENGTH_TOO_LONG || ERR_GET_REASON(e) == SSL_R_UNKNOWN_PROTOCOL ||
        ERR_GET_REASON(e) == SSL_R_RECORD_LENGTH_MISMATCH)
      return "it does not speak TLS (" + text + ")";
    return text;
  }
  if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) return "it closed the connection during the handshake";
  return fmt::format("SSL error {}", error);
}

using HandshakeFn = int (*)(SSL*);
using FreeFn = void (*)(SSL*);

template <class Fn>
Fn real(const char* name) {
  void* f = ::dlsym(RTLD_NEXT, name);
  if (!f) {
    std::fprintf(stderr, "troupe: OpenSSL's %s is not loaded (%s)\n", name, ::dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(f);
}

bool non_blocking(SSL* ssl) {
  const int fd = SSL_get_fd(ssl);
  return fd >= 0 && (::fcntl(fd, F_GETFL) & O_NONBLOCK) != 0;
}

int watched(SSL* ssl, HandshakeFn handshake, bool accepting) {
  ERR_clear_error();  // CAF leaves the errors of failed connections in this thread's queue
  const int result = handshake(ssl);
  // Only the handshakes of CAF's network layer (non-blocking sockets, in a process whose layer
  // has TLS): a program's own blocking OpenSSL connections are left as they are.
  if (!armed.load(std::memory_order_relaxed) || !non_blocking(ssl)) return result;
  if (result == 1) {
    std::lock_guard<std::mutex> lock(watch_mutex);
    handshakes.erase(ssl);
    return result;
  }
  const int error = SSL_get_error(ssl, result);
  const auto now = std::chrono::steady_clock::now();
  bool report = false, overdue = false;
  std::string peer;
  {
    std::unique_lock<std::mutex> lock(watch_mutex);
    auto it = handshakes.find(ssl);
    if (it == handshakes.end()) {
      lock.unlock();
      Handshake fresh{now, peer_of(ssl), false};
      lock.lock();
      it = handshakes.emplace(ssl, std::move(fresh)).first;
    }
    peer = it->second.peer;
    if (!it->second.reported) {
      if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
        report = it->second.reported = true;
      } else if (now - it->second.started > kTlsHandshakeBound) {
        report = overdue = it->second.reported = true;
      }
    }
  }
  if (!report) return result;
  if (overdue) {
    // The peer (or, connecting, the listener) sent no TLS within the bound: CAF would keep
    // polling it; shutting the socket down makes its next read fail, and CAF drops it.
    ::shutdown(SSL_get_fd(ssl), SHUT_RDWR);
    if (accepting)
      emit_refusal("refused a TLS connection from", peer,
                   fmt::format("no TLS handshake within {} s", kTlsHandshakeBound.count()));
    else
      emit_refusal("gave up the TLS connection to", peer,
                   fmt::format("no TLS handshake within {} s (a listener without TLS?)", kTlsHandshakeBound.count()));
  } else {
    emit_refusal(accepting ? "refused a TLS connection from" : "the TLS handshake failed with", peer, why(ssl, error));
  }
  return result;
}

}  // namespace

std::string handshake_failure(SSL* ssl, int error) { return why(ssl, error); }

void watch_tls_handshakes() { armed.store(true); }

void set_tls_event_log(std::function<void(const std::string&)> log) {
  std::lock_guard<std::mutex> lock(watch_mutex);
  event_log = std::move(log);
}

}  // namespace troupe

// The definitions libcaf_openssl's calls resolve to (this library comes before libssl in the
// process's lookup order).
extern "C" {

int SSL_accept(SSL* ssl) {
  static const auto accept = troupe::real<troupe::HandshakeFn>("SSL_accept");
  return troupe::watched(ssl, accept, true);
}

int SSL_connect(SSL* ssl) {
  static const auto connect = troupe::real<troupe::HandshakeFn>("SSL_connect");
  return troupe::watched(ssl, connect, false);
}

// OpenSSL reads its thread's error queue to tell a retry (want read) from a failure, and CAF
// never empties it: an error one connection left (a peer that went away) made the next read of
// another connection in the same thread fail, and CAF dropped that healthy connection too. Each
// call starts with an empty queue, as OpenSSL's documentation asks.
int SSL_read(SSL* ssl, void* buffer, int size) {
  static const auto read = troupe::real<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return read(ssl, buffer, size);
}

int SSL_write(SSL* ssl, const void* buffer, int size) {
  static const auto write = troupe::real<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return write(ssl, buffer, size);
}

void SSL_free(SSL* ssl) {
  static const auto free = troupe::real<troupe::FreeFn>("SSL_free");
  if (ssl) {
    std::lock_guard<std::mutex> lock(troupe::watch_mutex);
    troupe::handshakes.erase(ssl);
  }
  free(ssl);
}

}  // extern "C"

namespace troupe {

bool tls_handshakes_watched() {
  // Where the process's lookup finds each function, against where this library is (taking the
  // address of ::SSL_read here would give whatever the lookup finds, too).
  Dl_info here{}, found{};
  if (::dladdr(reinterpret_cast<void*>(&watched), &here) == 0) return false;
  for (const char* name : {"SSL_accept", "SSL_connect", "SSL_read", "SSL_write", "SSL_free"}) {
    void* f = ::dlsym(RTLD_DEFAULT, name);
    if (!f || ::dladdr(f, &found) == 0 || found.dli_fbase != here.dli_fbase) return false;
  }
  return true;
}

}  // namespace troupe
