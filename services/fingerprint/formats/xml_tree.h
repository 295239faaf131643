// A small namespace-aware XML element tree, read with Expat and written
// back, for the XML encoding of ANSI/NIST-ITL transactions (ansi_nist_xml.h).
//
// Reading is strict XML 1.0 with namespaces (Expat 2.5): names are matched by
// namespace URI, never by prefix. A DOCTYPE is refused, so the only entities
// are the five predefined ones and character references, and nothing outside
// the document is ever read. The tree's size is bounded: at most
// XmlLimits::max_elements elements nested at most max_depth deep.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_XML_TREE_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_XML_TREE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist {

struct XmlAttribute {
  std::string ns;     // namespace URI; "" for an unprefixed attribute
  std::string local;  // local name
  std::string value;
};

struct XmlElement {
  std::string ns;      // namespace URI; "" for none
  std::string local;   // local name
  std::string prefix;  // as written ("" for the default namespace); the writer writes it
  std::vector<XmlAttribute> attributes;
  // The character data directly inside this element (entities resolved,
  // CDATA sections included), every piece concatenated.
  std::string text;
  std::vector<XmlElement> children;
  int line = 0;  // of the start tag (1-based); 0 for elements built in memory

  // Set by ParseXmlDocument (and LinkXmlTree) for error messages: the
  // parent (nullptr for the root) and the 1-based position among the
  // parent's children of the same name, `repeated` when there are several.
  const XmlElement* parent = nullptr;
  int position = 1;
  bool repeated = false;
  // Reader bookkeeping: set by whoever interprets the element, so what
  // nobody read can be reported.
  mutable bool used = false;

  bool Is(absl::string_view ns_uri, absl::string_view local_name) const {
    return local == local_name && ns == ns_uri;
  }
  // "prefix:local" (or "local").
  std::string QName() const;
  // From the root, positions where a name repeats:
  // "itl:NISTBiometricInformationExchangePackage/itl:PackageFingerprintImageRecord[2]/biom:FingerImpressionImage".
  std::string Path() const;
  // The unqualified attribute `local_name`, or nullptr.
  const XmlAttribute* Attribute(absl::string_view local_name) const;
};

struct XmlLimits {
  size_t max_depth = 64;
  size_t max_elements = size_t{1} << 20;
};

// Parses a whole document into its root element (parent links set: the
// root is on the heap so they stay valid).
// INVALID_ARGUMENT "line L, column C: <Expat's message> (in <path of the open
// elements>)" for input that is not well-formed namespace-aware XML 1.0, a
// DOCTYPE, or a tree over the limits.
absl::StatusOr<std::unique_ptr<XmlElement>> ParseXmlDocument(absl::string_view xml, const XmlLimits& limits = {});

// Sets parent, position and repeated throughout a tree built in memory.
void LinkXmlTree(XmlElement* root);

// True when `s` can be written as XML 1.0 text: well-formed UTF-8 (no
// overlong forms or surrogates) of characters XML allows (tab, LF, CR,
// U+0020-U+D7FF, U+E000-U+FFFD, U+10000-U+10FFFF).
bool IsXmlText(absl::string_view s);

// The document: an XML declaration, then `root` indented by two spaces per
// level, with `namespaces` (prefix, URI) declared on the root. An element
// with children is written without its text; one without children keeps its
// text exactly (CR and markup characters escaped). Texts must pass
// IsXmlText (the caller checks).
std::string WriteXmlDocument(const XmlElement& root,
                             const std::vector<std::pair<std::string, std::string>>& namespaces);

}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_XML_TREE_H_
