#pragma once
// A process's network layer: the TLS identity it shows and checks (a CA certificate, its own
// certificate and key, PEM files), and CAF's middleman as every networked Troupe process sets it
// up (defined in actors/cluster/network.cpp, with the message types values cross in).
#include <chrono>
#include <string>

namespace caf {
class actor_system_config;
}

namespace troupe {

// One process's TLS identity: the cluster's CA and this process's certificate (PEM; may hold
// the chain after it) and unencrypted private key (PEM). Empty (no CA): plain TCP.
struct TlsFiles {
  std::string ca;
  std::string certificate;
  std::string key;
  bool empty() const { return ca.empty(); }
  friend bool operator==(const TlsFiles&, const TlsFiles&) = default;
};

// CAF's network layer (the middleman), for a process that talks to other processes: heartbeats
// every `heartbeat`, and a peer silent for `connection_timeout` is taken as gone (a hung peer is
// seen only so).
// With `tls` (actors/cluster/tls.hpp) every connection is mutual TLS through CAF's openssl
// module: published and connected through it, automatic connections off.
struct NetworkOptions {
  std::chrono::milliseconds heartbeat{200};
  std::chrono::milliseconds connection_timeout{1000};
  TlsFiles tls;
  std::string tls_holder = "this process";  // who the TLS files are, in their errors ("task ps:0")
};

// CAF's network layer as every networked Troupe process sets it up: the middleman, the message
// types tensors cross in (actors/cluster/tensor_transfer.hpp), heartbeats and the connection
// timeout, and deserializing in the middleman's own thread (middleman.workers=0: no hop to a
// worker thread per message; docs/performance.md, "Bytes between two processes"). The TLS files
// are checked first (check_tls_files): CAF's own failure at a bad file leaves the process hanging at exit.
void configure_network(caf::actor_system_config& config, const NetworkOptions& network);

}  // namespace troupe
