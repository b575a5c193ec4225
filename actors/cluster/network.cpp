// configure_network (actors/network.hpp): CAF's middleman, the cluster's message types and TLS.
#include <caf/io/all.hpp>
#include <caf/openssl/manager.hpp>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/tls.hpp"
#include "actors/cluster/tls_watch.hpp"
#include "actors/network.hpp"
#include "core/error.hpp"

namespace troupe {

void configure_network(caf::actor_system_config& config, const NetworkOptions& network) {
  config.load<caf::io::middleman>();
  add_cluster_types(config);
  config.set("middleman.heartbeat-interval", caf::timespan{network.heartbeat});
  config.set("middleman.connection-timeout", caf::timespan{network.connection_timeout});
  config.set("middleman.workers", int64_t(0));
  // Off in CAF 0.17 already; said here because such connections would be plain TCP.
  config.set("middleman.enable-automatic-connections", false);
  if (!network.tls.empty()) {
    check_tls_files(network.tls, network.tls_holder);
    config.load<caf::openssl::manager>();
    config.openssl_cafile = network.tls.ca;
    config.openssl_certificate = network.tls.certificate;
    config.openssl_key = network.tls.key;
    watch_tls_handshakes();
    // Without the watch, one peer leaving would drop this process's other TLS connections.
    if (!tls_handshakes_watched())
      fail(ErrorCode::failed_precondition,
           "TLS needs Troupe's OpenSSL workarounds (actors/cluster/tls_watch.hpp), but this program finds libssl's "
           "SSL_read first: link libtroupe_actors before libssl (or do not link libssl yourself)");
  }
}

}  // namespace troupe
