#pragma once
// The TLS handshakes of this process, watched where CAF 0.17.6 shows nothing: its openssl
// module drops a refused peer without a word (its log is compiled out in Debian's build) and
// gives no hook, and a peer that connects to a TLS port and stays silent (or a TLS client of a
// plain listener) keeps its multiplexer thread spinning for as long as the peer stays (CAF
// #1060, fixed only in CAF 0.18.4), and it never empties OpenSSL's per-thread error
// queue, so the error a closed connection leaves makes the next read of any other connection in
// that thread fail: one member leaving dropped every TLS connection of the process with it
// (found here; CAF 0.17.6's session::do_some). So this library defines SSL_accept,
// SSL_connect, SSL_read, SSL_write and SSL_free itself: each calls OpenSSL's own (dlsym
// RTLD_NEXT; libcaf_openssl resolves them here first) with an empty error queue, and
//   - a handshake that fails is logged with the peer's address and why ("refused a TLS
//     connection from 127.0.0.1:40112: peer did not return a certificate");
//   - a handshake still not done after kTlsHandshakeBound has its socket shut down (then CAF
//     drops the connection) and is logged so;
//   - the same refusal again (same kind, host and reason) is counted, and the count told at
//     most once per kRepeatWindow ("refused a TLS connection from 127.0.0.1 37 more time(s) in
//     the last 10 s ...").
// Nothing else of the connection is touched; a connection made is never seen again. (Measured:
// a silent peer holds the node's multiplexer thread at 100% of a core until it is cut off.)
#include <chrono>
#include <functional>
#include <string>

struct sockaddr_storage;
struct ssl_st;

namespace troupe {

inline constexpr std::chrono::seconds kTlsHandshakeBound{3};
// Refusals of one kind from one host are told once in full, then as a count at most once per
// this window (a misconfigured peer retries several times a second).
inline constexpr std::chrono::seconds kRepeatWindow{10};

// Only handshakes on non-blocking sockets (CAF's), and only once this is called (by
// configure_network for a network layer with TLS), are watched: a program's own OpenSSL
// connections, blocking or in a process without a TLS cluster, are left alone. The error queue
// is emptied before every call in any case.
void watch_tls_handshakes();

// Where the lines go: one per refused or abandoned handshake. Unset: standard error, prefixed
// "troupe: ". A ClusterMember sets its own log while it lives.
void set_tls_event_log(std::function<void(const std::string&)> log);

// Why a TLS handshake on `ssl` failed with SSL_get_error's `error`, in the words the cluster
// port's refusals use ("it has no certificate (peer did not return a certificate)"), from what
// OpenSSL left in this thread's error queue (left as it is).
std::string handshake_failure(ssl_st* ssl, int error);

// A peer's address as the refusals name it: "127.0.0.1:40112", "[::1]:40112".
std::string address_text(const sockaddr_storage& address);

// A refused connection as the handshakes' refusals are told: "`what` `peer`: `reason`" the first
// time a host is refused so, then a count at most once per kRepeatWindow; "" while counting.
// For other listeners of the process (the data path's).
std::string refusal_line(const std::string& what, const std::string& peer, const std::string& reason);

// Whether OpenSSL's calls in this process come through the functions above: false where the
// program was linked with libssl ahead of libtroupe_actors, so that libssl's own are found
// first. A network layer with TLS is then refused (configure_network): without the workarounds
// one peer leaving drops the process's other connections (the test binary once showed it).
bool tls_handshakes_watched();

}  // namespace troupe
