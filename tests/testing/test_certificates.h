// Test PKI made with the openssl command line (Debian's openssl): CAs and certificates they
// sign, with the names a loopback server needs (DNS:localhost, IP:127.0.0.1).
#ifndef GRAIL_TESTS_TESTING_TEST_CERTIFICATES_H_
#define GRAIL_TESTS_TESTING_TEST_CERTIFICATES_H_

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace grail {

// Writes DIR/NAME.key and DIR/NAME.crt: a self-signed CA (P-256, one day).
inline bool MakeCertificateAuthority(const std::string& dir, const std::string& name) {
  const std::string command = "cd '" + dir +
                              "' && openssl req -x509 -newkey ec -pkeyopt "
                              "ec_paramgen_curve:prime256v1 -nodes -keyout " +
                              name + ".key -out " + name + ".crt -days 1 -subj /CN=" + name +
                              " >/dev/null 2>&1";
  const bool ok = std::system(command.c_str()) == 0;
  EXPECT_TRUE(ok) << command;
  return ok;
}

// Writes DIR/NAME.key and DIR/NAME.crt signed by DIR/CA.{key,crt}, valid for localhost and
// 127.0.0.1 (as a server) and as a client certificate.
inline bool MakeSignedCertificate(const std::string& dir, const std::string& name,
                                  const std::string& ca) {
  const std::string command =
      "cd '" + dir + "' && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n" +
      "extendedKeyUsage=serverAuth,clientAuth\\n' > " + name + ".ext" +
      " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout " + name +
      ".key -out " + name + ".csr -subj /CN=" + name + " >/dev/null 2>&1" +
      " && openssl x509 -req -in " + name + ".csr -CA " + ca + ".crt -CAkey " + ca +
      ".key -CAcreateserial -out " + name + ".crt -days 1 -extfile " + name +
      ".ext >/dev/null 2>&1";
  const bool ok = std::system(command.c_str()) == 0;
  EXPECT_TRUE(ok) << command;
  return ok;
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_TEST_CERTIFICATES_H_
