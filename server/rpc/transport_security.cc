#include "server/rpc/transport_security.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/file_text.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace grail {
namespace {

struct BioDeleter {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Deleter {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyDeleter {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioDeleter> MemoryBio(const std::string& text) {
  return std::unique_ptr<BIO, BioDeleter>(
      BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

absl::StatusOr<std::unique_ptr<X509, X509Deleter>> FirstCertificate(const std::string& path,
                                                                    absl::string_view what) {
  absl::StatusOr<std::string> pem = ReadFileText(path, what);
  if (!pem.ok()) return pem.status();
  auto bio = MemoryBio(*pem);
  std::unique_ptr<X509, X509Deleter> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": no PEM certificate could be read from it"));
  }
  return cert;
}

}  // namespace

absl::Status CheckTlsFiles(const ServerTlsFiles& files) {
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (files.cert.empty()) {
    return absl::InvalidArgumentError("TLS needs --tls-cert and --tls-key");
  }
  absl::StatusOr<std::unique_ptr<X509, X509Deleter>> cert =
      FirstCertificate(files.cert, "--tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key_pem = ReadFileText(files.key, "--tls-key");
  if (!key_pem.ok()) return key_pem.status();
  auto bio = MemoryBio(*key_pem);
  std::unique_ptr<EVP_PKEY, KeyDeleter> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key ", files.key, ": no unencrypted PEM private key could be read from it"));
  }
  if (X509_check_private_key(cert->get(), key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls-key ", files.key, " does not belong to the certificate in ", files.cert));
  }
  if (!files.client_ca.empty()) {
    absl::StatusOr<std::unique_ptr<X509, X509Deleter>> ca =
        FirstCertificate(files.client_ca, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeTlsServerCredentials(
    const ServerTlsFiles& files) {
  const absl::Status checked = CheckTlsFiles(files);
  if (!checked.ok()) return checked;
  const unsigned int interval = static_cast<unsigned int>(std::max(1, files.reload_seconds));
  std::shared_ptr<grpc::experimental::CertificateProviderInterface> provider =
      files.client_ca.empty()
          ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                files.key, files.cert, interval)
          : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                files.key, files.cert, files.client_ca, interval);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!files.client_ca.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

}  // namespace grail
