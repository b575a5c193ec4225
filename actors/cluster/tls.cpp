#include "actors/cluster/tls.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/files.hpp"

namespace troupe {
namespace {

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE, X509_STORE_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;
void free_chain(STACK_OF(X509) * s) { sk_X509_pop_free(s, X509_free); }
using ChainPtr = std::unique_ptr<STACK_OF(X509), Deleter<STACK_OF(X509), free_chain>>;

// OpenSSL's queued errors, oldest first, as one line (and the queue emptied).
std::string openssl_errors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    out += (out.empty() ? "" : "; ") + std::string(text);
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

BioPtr open_file(const std::string& path, const std::string& who, const char* what) {
  BioPtr bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) {
    ERR_clear_error();
    fail(ErrorCode::invalid_argument, "{}: cannot read TLS {} {}: {}", who, what, path, std::strerror(errno));
  }
  return bio;
}

// The certificates of a PEM file, the first (the leaf) first.
std::vector<X509Ptr> read_certificates(const std::string& path, const std::string& who, const char* what) {
  BioPtr bio = open_file(path, who, what);
  std::vector<X509Ptr> out;
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
  ERR_clear_error();  // the end of the file reads as an error
  if (out.empty()) fail(ErrorCode::invalid_argument, "{}: TLS {} {} holds no PEM certificate", who, what, path);
  return out;
}

KeyPtr read_key(const std::string& path, const std::string& who) {
  BioPtr bio = open_file(path, who, "key");
  // No passphrase callback input: an encrypted key fails here instead of prompting.
  auto no_passphrase = [](char*, int, int, void*) -> int { return -1; };
  KeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
  if (!key)
    fail(ErrorCode::invalid_argument, "{}: TLS key {} is not an unencrypted PEM private key ({})", who, path,
         openssl_errors());
  return key;
}

// ---- writing --------------------------------------------------------------------------

std::string pem_of(const std::function<int(BIO*)>& write) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || write(bio.get()) != 1) fail(ErrorCode::internal, "cannot encode PEM: {}", openssl_errors());
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, std::size_t(n));
}

KeyPtr new_key() {
  KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) fail(ErrorCode::internal, "cannot make an EC P-256 key: {}", openssl_errors());
  return key;
}

void add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext || X509_add_ext(cert, ext, -1) != 1) {
    X509_EXTENSION_free(ext);
    fail(ErrorCode::internal, "cannot add certificate extension {}: {}", value, openssl_errors());
  }
  X509_EXTENSION_free(ext);
}

// A certificate for `key` named `name`, signed by `issuer_key` (issuer: `issuer`, or itself).
X509Ptr new_certificate(const std::string& name, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, int days) {
  X509Ptr cert(X509_new());
  X509_set_version(cert.get(), 2);
  std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>> serial(BN_new());
  BN_rand(serial.get(), 120, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
  BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get()));
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300);  // clocks of the hosts may differ a little
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), long(days) * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("troupe cluster"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0);
  X509* signer = issuer ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  add_extension(cert.get(), signer, NID_subject_key_identifier, "hash");
  if (issuer) {
    add_extension(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(cert.get(), signer, NID_key_usage, "critical,digitalSignature,keyAgreement");
    add_extension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
  } else {
    add_extension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    add_extension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0)
    fail(ErrorCode::internal, "cannot sign the certificate of {}: {}", name, openssl_errors());
  return cert;
}

void write_identity(const std::string& dir, const std::string& stem, X509* cert, EVP_PKEY* key) {
  write_file_durably(dir + "/" + stem + ".key",
             pem_of([&](BIO* b) { return PEM_write_bio_PrivateKey(b, key, nullptr, nullptr, 0, nullptr, nullptr); }),
             0600);
  write_file_durably(dir + "/" + stem + ".pem", pem_of([&](BIO* b) { return PEM_write_bio_X509(b, cert); }), 0644);
}

}  // namespace

void check_tls_files(const TlsFiles& files, const std::string& who) {
  if (files.ca.empty() || files.certificate.empty() || files.key.empty())
    fail(ErrorCode::invalid_argument, "{}: TLS needs the cluster CA, a certificate and a key (got ca '{}', certificate '{}', key '{}')",
         who, files.ca, files.certificate, files.key);
  std::vector<X509Ptr> cas = read_certificates(files.ca, who, "CA");
  std::vector<X509Ptr> chain = read_certificates(files.certificate, who, "certificate");
  KeyPtr key = read_key(files.key, who);
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    ERR_clear_error();
    fail(ErrorCode::invalid_argument, "{}: TLS key {} does not belong to certificate {}", who, files.key,
         files.certificate);
  }
  StorePtr store(X509_STORE_new());
  for (auto& ca : cas) X509_STORE_add_cert(store.get(), ca.get());
  ChainPtr untrusted(sk_X509_new_null());
  for (std::size_t i = 1; i < chain.size(); ++i) sk_X509_push(untrusted.get(), X509_dup(chain[i].get()));
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), chain.front().get(), untrusted.get());
  if (X509_verify_cert(ctx.get()) != 1) {
    const int error = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    fail(ErrorCode::invalid_argument, "{}: TLS certificate {} does not verify against the cluster CA {} ({})", who,
         files.certificate, files.ca, X509_verify_cert_error_string(error));
  }
}

std::string make_cluster_certificates(const std::string& spec_path, const std::string& dir, int days) {
  if (days < 1) fail(ErrorCode::invalid_argument, "certificates must be valid for a day at least, got {} days", days);
  const ClusterSpec spec = ClusterSpec::from_file(spec_path);  // every check of the spec first
  nlohmann::json doc;
  {
    std::ifstream in(spec_path);
    doc = nlohmann::json::parse(in);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail(ErrorCode::unavailable, "cannot create {}: {}", dir, ec.message());
  if (std::filesystem::exists(dir + "/ca.key") || std::filesystem::exists(dir + "/ca.pem"))
    fail(ErrorCode::already_exists,
         "{} holds a cluster CA already (ca.pem): a new one would lock out every task the old one signed; remove "
         "it or choose another directory",
         dir);

  KeyPtr ca_key = new_key();
  // A CA of this cluster alone (CAF checks no host names: whoever has a certificate of this CA
  // is a member), named apart from every other cluster's.
  std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>> tag(BN_new());
  BN_rand(tag.get(), 32, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY);
  char* hex = BN_bn2hex(tag.get());
  const std::string ca_name = fmt::format("troupe cluster CA {}", hex);
  OPENSSL_free(hex);
  X509Ptr ca = new_certificate(ca_name, ca_key.get(), nullptr, ca_key.get(), days);
  write_identity(dir, "ca", ca.get(), ca_key.get());

  nlohmann::json tasks = nlohmann::json::object();
  auto issue = [&](const std::string& name, const std::string& stem) {
    KeyPtr key = new_key();
    X509Ptr cert = new_certificate(name, key.get(), ca.get(), ca_key.get(), days);
    write_identity(dir, stem, cert.get(), key.get());
    return nlohmann::json{{"certificate", stem + ".pem"}, {"key", stem + ".key"}};
  };
  for (auto& task : spec.tasks()) tasks[task.to_string()] = issue(task.to_string(), fmt::format("{}-{}", task.job, task.index));
  nlohmann::json client = issue("client", "client");
  doc["tls"] = {{"ca", "ca.pem"}, {"tasks", tasks}, {"client", client}};
  const std::string out = dir + "/cluster.json";
  write_file_durably(out, doc.dump(2) + "\n", 0644);
  // The directory's entries too, so the files survive a crash right after.
  const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
  return out;
}

}  // namespace troupe
