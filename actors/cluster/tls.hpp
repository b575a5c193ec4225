#pragma once
// Mutual TLS for a cluster (docs/cluster.md, "Only members get in (mutual TLS)"): the files a spec's "tls"
// section names, made and checked here; actors/runtime.cpp builds the network layer with them
// (CAF's openssl module), so every connection of the process is TLS and a peer must present a
// certificate issued by the cluster's CA.
#include <string>

#include "actors/cluster/cluster_spec.hpp"

namespace troupe {

// Checks an identity before anything is built with it: every file readable PEM, the key
// unencrypted and belonging to the certificate, the certificate issued by the CA and valid now.
// Throws invalid_argument naming `who` ("task ps:0"), the file and what is wrong, e.g. "task
// ps:0: TLS certificate /c/ps-0.pem is not from the cluster CA /c/ca.pem (unable to get local
// issuer certificate)".
void check_tls_files(const TlsFiles& files, const std::string& who);

// Makes a cluster CA (EC P-256, valid `days`), and a certificate and key signed by it for every
// task of the spec at `spec_path` (subject CN "ps:0", for TLS clients and servers) and for
// clients ("client"), in `dir` (created; keys mode 0600, every file fsynced), and writes
// DIR/cluster.json: the spec with its "tls" section naming them (relative to DIR, so the
// directory may move). Returns that spec's path. Refuses a `dir` that already holds a CA
// (already_exists): a second CA would lock out every task the first one signed.
std::string make_cluster_certificates(const std::string& spec_path, const std::string& dir, int days = 825);

}  // namespace troupe
