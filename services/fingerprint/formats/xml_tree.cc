#include "services/fingerprint/formats/xml_tree.h"

#include <expat.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist {
namespace {

// Expat reports a namespaced name as "URI<sep>local<sep>prefix". Expat
// (since 2.4.5) refuses a namespace URI that contains the separator, so the
// split below is unambiguous.
constexpr char kNsSeparator = '\n';

// Expat's length arguments are ints: the document is fed in pieces.
constexpr size_t kChunk = size_t{1} << 20;

void SplitName(const char* name, std::string* ns, std::string* local, std::string* prefix) {
  const absl::string_view s(name);
  const size_t first = s.find(kNsSeparator);
  if (first == absl::string_view::npos) {
    ns->clear();
    local->assign(s.data(), s.size());
    prefix->clear();
    return;
  }
  ns->assign(s.data(), first);
  const absl::string_view rest = s.substr(first + 1);
  const size_t second = rest.find(kNsSeparator);
  if (second == absl::string_view::npos) {
    local->assign(rest.data(), rest.size());
    prefix->clear();
  } else {
    local->assign(rest.data(), second);
    const absl::string_view p = rest.substr(second + 1);
    prefix->assign(p.data(), p.size());
  }
}

std::string QNameOf(const XmlElement& e) { return e.prefix.empty() ? e.local : absl::StrCat(e.prefix, ":", e.local); }

class TreeBuilder {
 public:
  explicit TreeBuilder(const XmlLimits& limits) : limits_(limits) { stack_.push_back(&document_); }

  absl::StatusOr<std::unique_ptr<XmlElement>> Parse(absl::string_view xml) {
    XML_Parser parser = XML_ParserCreateNS(nullptr, kNsSeparator);
    if (parser == nullptr) return absl::ResourceExhaustedError("XML: cannot create a parser");
    parser_ = parser;
    XML_SetReturnNSTriplet(parser, XML_TRUE);
    XML_SetUserData(parser, this);
    XML_SetElementHandler(parser, &TreeBuilder::Start, &TreeBuilder::End);
    XML_SetCharacterDataHandler(parser, &TreeBuilder::Text);
    XML_SetStartDoctypeDeclHandler(parser, &TreeBuilder::Doctype);
    XML_SetParamEntityParsing(parser, XML_PARAM_ENTITY_PARSING_NEVER);
    absl::Status status;
    size_t at = 0;
    do {
      const size_t n = std::min(kChunk, xml.size() - at);
      const bool last = at + n == xml.size();
      if (XML_Parse(parser, xml.data() + at, static_cast<int>(n), last ? XML_TRUE : XML_FALSE) != XML_STATUS_OK) {
        status = Failure(parser);
        break;
      }
      at += n;
    } while (at < xml.size());
    XML_ParserFree(parser);
    if (!status.ok()) return status;
    if (document_.children.size() != 1) return absl::InvalidArgumentError("XML: no root element");
    auto root = std::make_unique<XmlElement>(std::move(document_.children[0]));
    LinkXmlTree(root.get());
    return root;
  }

 private:
  static void XMLCALL Start(void* data, const char* name, const char** atts) {
    auto* self = static_cast<TreeBuilder*>(data);
    if (!self->error_.empty()) return;
    if (self->stack_.size() > self->limits_.max_depth) {
      self->Stop(absl::StrCat("elements nest deeper than ", self->limits_.max_depth, " levels"));
      return;
    }
    if (++self->elements_ > self->limits_.max_elements) {
      self->Stop(absl::StrCat("more than ", self->limits_.max_elements, " elements"));
      return;
    }
    XmlElement* parent = self->stack_.back();
    parent->children.emplace_back();
    XmlElement& e = parent->children.back();
    SplitName(name, &e.ns, &e.local, &e.prefix);
    e.line = static_cast<int>(XML_GetCurrentLineNumber(self->parser_));
    for (size_t i = 0; atts[i] != nullptr; i += 2) {
      XmlAttribute a;
      std::string prefix;
      SplitName(atts[i], &a.ns, &a.local, &prefix);
      a.value = atts[i + 1];
      e.attributes.push_back(std::move(a));
    }
    self->stack_.push_back(&e);
  }

  static void XMLCALL End(void* data, const char*) {
    auto* self = static_cast<TreeBuilder*>(data);
    if (!self->error_.empty()) return;
    self->stack_.pop_back();
  }

  static void XMLCALL Text(void* data, const char* s, int len) {
    auto* self = static_cast<TreeBuilder*>(data);
    if (!self->error_.empty() || self->stack_.size() < 2) return;
    self->stack_.back()->text.append(s, static_cast<size_t>(len));
  }

  static void XMLCALL Doctype(void* data, const char*, const char*, const char*, int) {
    static_cast<TreeBuilder*>(data)->Stop("a DOCTYPE is not accepted (no DTDs, no entity declarations)");
  }

  void Stop(std::string message) {
    error_ = std::move(message);
    XML_StopParser(parser_, XML_FALSE);
  }

  // The open elements, as a path.
  std::string OpenPath() const {
    std::string path;
    for (size_t i = 1; i < stack_.size(); ++i) {
      const XmlElement* e = stack_[i];
      const XmlElement* parent = stack_[i - 1];
      int position = 0;
      for (const XmlElement& c : parent->children) {
        if (c.local == e->local && c.ns == e->ns) ++position;
        if (&c == e) break;
      }
      if (!path.empty()) path += '/';
      path += QNameOf(*e);
      if (position > 1) absl::StrAppend(&path, "[", position, "]");
    }
    return path;
  }

  absl::Status Failure(XML_Parser parser) const {
    const std::string what = error_.empty() ? XML_ErrorString(XML_GetErrorCode(parser)) : error_;
    std::string message = absl::StrCat("XML: line ", XML_GetCurrentLineNumber(parser), ", column ",
                                       XML_GetCurrentColumnNumber(parser) + 1, ": ", what);
    const std::string path = OpenPath();
    if (!path.empty()) absl::StrAppend(&message, " (in ", path, ")");
    return absl::InvalidArgumentError(message);
  }

  const XmlLimits limits_;
  XML_Parser parser_ = nullptr;
  XmlElement document_;  // holds the root as its only child
  std::vector<XmlElement*> stack_;
  size_t elements_ = 0;
  std::string error_;
};

void Indent(int depth, std::string* out) { out->append(static_cast<size_t>(depth) * 2, ' '); }

void Escape(absl::string_view s, bool attribute, std::string* out) {
  for (char c : s) {
    switch (c) {
      case '&':
        *out += "&amp;";
        break;
      case '<':
        *out += "&lt;";
        break;
      case '>':
        *out += "&gt;";
        break;
      case '\r':  // a literal CR would come back as LF
        *out += "&#13;";
        break;
      case '"':
        *out += attribute ? "&quot;" : "\"";
        break;
      case '\t':  // attribute values are whitespace-normalised
        *out += attribute ? "&#9;" : "\t";
        break;
      case '\n':
        *out += attribute ? "&#10;" : "\n";
        break;
      default:
        *out += c;
    }
  }
}

void WriteElement(const XmlElement& e, int depth, const std::vector<std::pair<std::string, std::string>>* namespaces,
                  std::string* out) {
  Indent(depth, out);
  const std::string name = QNameOf(e);
  *out += '<';
  *out += name;
  if (namespaces != nullptr) {
    for (const auto& [prefix, uri] : *namespaces) {
      *out += "\n";
      Indent(depth + 2, out);
      *out += prefix.empty() ? "xmlns" : absl::StrCat("xmlns:", prefix);
      *out += "=\"";
      Escape(uri, true, out);
      *out += '"';
    }
  }
  for (const XmlAttribute& a : e.attributes) {
    *out += ' ';
    *out += a.local;  // the writer's attributes are unqualified
    *out += "=\"";
    Escape(a.value, true, out);
    *out += '"';
  }
  if (e.children.empty()) {
    if (e.text.empty()) {
      *out += "/>\n";
      return;
    }
    *out += '>';
    Escape(e.text, false, out);
    absl::StrAppend(out, "</", name, ">\n");
    return;
  }
  *out += ">\n";
  for (const XmlElement& c : e.children) WriteElement(c, depth + 1, nullptr, out);
  Indent(depth, out);
  absl::StrAppend(out, "</", name, ">\n");
}

}  // namespace

std::string XmlElement::QName() const { return QNameOf(*this); }

std::string XmlElement::Path() const {
  std::vector<const XmlElement*> chain;
  for (const XmlElement* e = this; e != nullptr; e = e->parent) chain.push_back(e);
  std::string path;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if (!path.empty()) path += '/';
    path += (*it)->QName();
    if ((*it)->repeated) absl::StrAppend(&path, "[", (*it)->position, "]");
  }
  return path;
}

const XmlAttribute* XmlElement::Attribute(absl::string_view local_name) const {
  for (const XmlAttribute& a : attributes) {
    if (a.ns.empty() && a.local == local_name) return &a;
  }
  return nullptr;
}

absl::StatusOr<std::unique_ptr<XmlElement>> ParseXmlDocument(absl::string_view xml, const XmlLimits& limits) {
  return TreeBuilder(limits).Parse(xml);
}

void LinkXmlTree(XmlElement* root) {
  // Iterative, so the depth of a built tree does not matter either.
  root->parent = nullptr;
  root->position = 1;
  root->repeated = false;
  std::vector<XmlElement*> todo{root};
  std::unordered_map<std::string, int> count;
  while (!todo.empty()) {
    XmlElement* e = todo.back();
    todo.pop_back();
    count.clear();
    for (XmlElement& c : e->children) {
      c.parent = e;
      c.position = ++count[absl::StrCat(c.ns, "\n", c.local)];
    }
    for (XmlElement& c : e->children) {
      c.repeated = count[absl::StrCat(c.ns, "\n", c.local)] > 1;
      todo.push_back(&c);
    }
  }
}

bool IsXmlText(absl::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return false;
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;  // a continuation byte, C0/C1 (overlong) or F5+
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return false;  // overlong
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF) return false;
    i += len;
  }
  return true;
}

std::string WriteXmlDocument(const XmlElement& root,
                             const std::vector<std::pair<std::string, std::string>>& namespaces) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  WriteElement(root, 0, &namespaces, &out);
  return out;
}

}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera
