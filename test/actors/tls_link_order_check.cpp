// A program that links libssl ahead of Troupe finds libssl's SSL_read first, so Troupe's OpenSSL
// workarounds (actors/cluster/tls_watch.hpp) are not in effect: a cluster member with TLS must
// refuse to start, naming the cause, rather than run without them. Exits 0 when it is refused so.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <openssl/ssl.h>

#include "actors/cluster/member.hpp"
#include "actors/cluster/tls.hpp"
#include "core/error.hpp"

int main() {
  // A use of libssl of its own, as such a program has (and so libssl ahead in its libraries).
  if (OPENSSL_init_ssl(0, nullptr) != 1) return 1;
  char pattern[] = "/tmp/troupe-tls-link-XXXXXX";
  if (!::mkdtemp(pattern)) return 1;
  const std::string dir = pattern;
  struct Remove {
    std::string path;
    ~Remove() { std::filesystem::remove_all(path); }
  } remove{dir};
  const auto port = troupe::free_loopback_ports(1)[0];
  std::ofstream(dir + "/spec.json") << "{\"cluster\": {\"ps\": [\"127.0.0.1:" << port << "\"]}}";
  const auto spec = troupe::ClusterSpec::from_file(troupe::make_cluster_certificates(dir + "/spec.json", dir + "/certs"));
  try {
    troupe::ClusterMember member(spec, {"ps", 0}, {.threads = 1, .tls = spec.tls_for({"ps", 0})});
    std::fprintf(stderr, "FAILED: a TLS member started without the OpenSSL workarounds in effect\n");
    return 1;
  } catch (const troupe::Error& e) {
    const std::string m = e.what();
    if (e.code() != troupe::ErrorCode::failed_precondition || m.find("link libtroupe_actors before libssl") == std::string::npos) {
      std::fprintf(stderr, "FAILED: refused with another error: %s\n", m.c_str());
      return 1;
    }
    std::printf("refused as it should be: %s\n", m.c_str());
    return 0;
  }
}
