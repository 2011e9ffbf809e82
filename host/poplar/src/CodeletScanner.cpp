#include "CodeletScanner.hpp"

#include <cctype>
#include <map>
#include <set>
#include <sstream>

namespace poplar {
namespace detail {

namespace {

struct Token {
  std::string text;
  unsigned line;
  bool word() const {
    return !text.empty() && (std::isalnum((unsigned char)text[0]) || text[0] == '_');
  }
};

// Past the block comment that starts at i ("/*"), counting its newlines.
std::size_t skipBlockComment(const std::string &src, std::size_t i, unsigned &line) {
  const std::size_t n = src.size();
  i += 2;
  while (i + 1 < n && !(src[i] == '*' && src[i + 1] == '/')) {
    if (src[i] == '\n')
      ++line;
    ++i;
  }
  return i + 2;
}

// Past the preprocessor directive that starts at i, with its continuation lines and comments.
std::size_t skipDirective(const std::string &src, std::size_t i, unsigned &line) {
  const std::size_t n = src.size();
  while (i < n && src[i] != '\n') {
    if (src[i] == '\\' && i + 1 < n && src[i + 1] == '\n') {
      ++line;
      i += 2;
    } else if (src[i] == '/' && i + 1 < n && src[i + 1] == '*') {
      i = skipBlockComment(src, i, line);
    } else {
      ++i;
    }
  }
  return i;
}

// Past the raw string literal R"delim( ... )delim" that starts at i.
std::size_t skipRawString(const std::string &src, std::size_t i, unsigned &line) {
  const std::size_t n = src.size();
  std::size_t open = src.find('(', i + 2);
  std::string delim = src.substr(i + 2, open - (i + 2));
  std::string close = ")" + delim + "\"";
  std::size_t endPos = src.find(close, open);
  for (std::size_t k = i; k < endPos && k < n; ++k)
    if (src[k] == '\n')
      ++line;
  return endPos == std::string::npos ? n : endPos + close.size();
}

// Comments, string/char literals and preprocessor lines removed; newlines kept.
std::vector<Token> tokenize(const std::string &src) {
  std::vector<Token> out;
  unsigned line = 1;
  std::size_t i = 0, n = src.size();
  bool lineStart = true;
  while (i < n) {
    char c = src[i];
    if (c == '\n') {
      ++line;
      lineStart = true;
      ++i;
      continue;
    }
    if (std::isspace((unsigned char)c)) {
      ++i;
      continue;
    }
    if (lineStart && c == '#') {
      i = skipDirective(src, i, line);
      continue;
    }
    lineStart = false;
    if (c == '/' && i + 1 < n && src[i + 1] == '/') {
      while (i < n && src[i] != '\n')
        ++i;
      continue;
    }
    if (c == '/' && i + 1 < n && src[i + 1] == '*') {
      i = skipBlockComment(src, i, line);
      continue;
    }
    if (c == 'R' && i + 1 < n && src[i + 1] == '"') {
      i = skipRawString(src, i, line);
      out.push_back({"\"\"", line});
      continue;
    }
    if (c == '"' || c == '\'') {
      char q = c;
      ++i;
      while (i < n && src[i] != q) {
        if (src[i] == '\\')
          ++i;
        ++i;
      }
      ++i;
      out.push_back({q == '"' ? "\"\"" : "''", line});
      continue;
    }
    if (std::isalnum((unsigned char)c) || c == '_') {
      std::size_t j = i;
      while (j < n && (std::isalnum((unsigned char)src[j]) || src[j] == '_' ||
                       (std::isdigit((unsigned char)src[i]) && (src[j] == '.' || src[j] == '\''))))
        ++j;
      out.push_back({src.substr(i, j - i), line});
      i = j;
      continue;
    }
    if (c == ':' && i + 1 < n && src[i + 1] == ':') {
      out.push_back({"::", line});
      i += 2;
      continue;
    }
    out.push_back({std::string(1, c), line});
    ++i;
  }
  return out;
}

// Joins tokens as C++ text; `compact` drops spaces except between two words.
std::string join(const std::vector<Token> &t, std::size_t b, std::size_t e, bool compact) {
  std::string s;
  for (std::size_t i = b; i < e; ++i) {
    if (!s.empty()) {
      bool needSpace = t[i].word() && (std::isalnum((unsigned char)s.back()) || s.back() == '_');
      if (!compact || needSpace)
        s += ' ';
    }
    s += t[i].text;
  }
  return s;
}

struct ClassInfo {
  std::string qualifiedName;
  bool isTemplate = false;
  std::vector<std::string> fields;
  unsigned line = 0;
};

class Scanner {
public:
  Scanner(std::vector<Token> toks, std::string file)
      : t_(std::move(toks)), file_(std::move(file)) {}

  std::vector<ScannedVertex> run() {
    scope(0, t_.size(), "");
    std::vector<ScannedVertex> out;
    std::set<std::string> seen;
    for (const auto &c : classes_) {
      if (c.isTemplate)
        continue;
      out.push_back({c.qualifiedName, normaliseName(c.qualifiedName), c.fields, c.line});
    }
    for (const auto &inst : instantiations_) {
      auto it = byName_.find(inst.first);
      if (it == byName_.end())
        continue; // an instantiation of something that is not a vertex
      const ClassInfo &c = classes_[it->second];
      std::string type = c.qualifiedName + "<" + inst.second + ">";
      out.push_back({type, normaliseName(type), c.fields, c.line});
    }
    for (const auto &v : out)
      if (!seen.insert(v.name).second)
        throw ScanError(file_ + ": vertex '" + v.name + "' is defined twice");
    return out;
  }

  static std::string normaliseName(const std::string &s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      char c = s[i];
      if (std::isspace((unsigned char)c)) {
        std::size_t j = i;
        while (j < s.size() && std::isspace((unsigned char)s[j]))
          ++j;
        bool before =
            !out.empty() && (std::isalnum((unsigned char)out.back()) || out.back() == '_');
        bool after = j < s.size() && (std::isalnum((unsigned char)s[j]) || s[j] == '_');
        if (before && after)
          out += ' ';
        i = j - 1;
        continue;
      }
      out += c;
    }
    return out;
  }

private:
  const std::string &text(std::size_t i) const {
    static const std::string none;
    return i < t_.size() ? t_[i].text : none;
  }

  std::size_t matching(std::size_t i, const char *open, const char *close) const {
    int depth = 0;
    for (; i < t_.size(); ++i) {
      if (t_[i].text == open)
        ++depth;
      else if (t_[i].text == close && --depth == 0)
        return i;
    }
    throw ScanError(file_ + ": unbalanced '" + open + "'");
  }

  // Skips a template argument list starting at '<'; returns the index after '>'.
  std::size_t skipAngles(std::size_t i) const {
    int depth = 0, paren = 0;
    for (; i < t_.size(); ++i) {
      const std::string &s = t_[i].text;
      if (s == "(")
        ++paren;
      else if (s == ")")
        --paren;
      else if (paren == 0 && s == "<")
        ++depth;
      else if (paren == 0 && s == ">" && --depth == 0)
        return i + 1;
      else if (s == ";" || s == "{")
        break;
    }
    throw ScanError(file_ + ": unbalanced '<' in a template declaration");
  }

  void scope(std::size_t b, std::size_t e, const std::string &ns) {
    std::size_t i = b;
    bool pendingTemplate = false;
    while (i < e) {
      const std::string &s = text(i);
      if (s == "namespace") {
        i = namespaceAt(i, e, ns);
        continue;
      }
      if (s == "template") {
        if (text(i + 1) == "<") {
          pendingTemplate = true;
          i = skipAngles(i + 1);
          continue;
        }
        i = instantiationAt(i, e, ns);
        continue;
      }
      if (s == "class" || s == "struct") {
        i = classAt(i, e, ns, pendingTemplate);
        pendingTemplate = false;
        continue;
      }
      if (s == "{") {
        // A function body or initializer at this scope: nothing to find inside.
        i = matching(i, "{", "}") + 1;
        pendingTemplate = false;
        continue;
      }
      if (s == ";")
        pendingTemplate = false;
      ++i;
    }
  }

  // The namespace declaration at i: its body scanned with the inner name; returns the
  // index after it.
  std::size_t namespaceAt(std::size_t i, std::size_t e, const std::string &ns) {
    std::size_t j = i + 1;
    std::string name;
    while (j < e && text(j) != "{" && text(j) != ";" && text(j) != "=")
      name += text(j++);
    if (text(j) != "{")
      return j + 1;
    std::size_t close = matching(j, "{", "}");
    std::string inner = name.empty() ? ns : (ns.empty() ? name : ns + "::" + name);
    scope(j + 1, close, inner);
    return close + 1;
  }

  // An explicit instantiation at i (template class|struct Name<args>;) recorded; returns
  // the index after its ';'.
  std::size_t instantiationAt(std::size_t i, std::size_t e, const std::string &ns) {
    std::size_t j = i + 1;
    if (text(j) == "class" || text(j) == "struct") {
      ++j;
      std::size_t nameBegin = j;
      while (j < e && text(j) != "<" && text(j) != ";")
        ++j;
      if (text(j) == "<") {
        std::string name = join(t_, nameBegin, j, true);
        if (name.rfind("::", 0) == 0)
          name = name.substr(2);
        std::size_t close = skipAngles(j);
        std::string args = join(t_, j + 1, close - 1, false);
        std::string qualified =
            name.find("::") == std::string::npos && !ns.empty() ? ns + "::" + name : name;
        instantiations_.emplace_back(qualified, args);
        j = close;
      }
    }
    while (j < e && text(j) != ";")
      ++j;
    return j + 1;
  }

  // Whether the base list starting at k (after the class name's ':') names a vertex base; k is left
  // at the
  // '{' or ';' that ends it.
  bool vertexBases(std::size_t &k, std::size_t e) const {
    bool vertex = false;
    while (k < e && text(k) != "{" && text(k) != ";") {
      const std::string &w = text(k);
      if ((w == "Vertex" || w == "MultiVertex" || w == "SupervisorVertex") &&
          (text(k + 1) == "," || text(k + 1) == "{"))
        vertex = true;
      if (w == "<") {
        k = skipAngles(k);
        continue;
      }
      ++k;
    }
    return vertex;
  }

  // The class or struct at i: recorded with its fields if it derives from a vertex base;
  // returns the index after it.
  std::size_t classAt(std::size_t i, std::size_t e, const std::string &ns, bool isTemplate) {
    std::size_t j = i + 1;
    // Skip attributes such as alignas(...) or [[...]].
    while (j < e && (text(j) == "alignas" || text(j) == "["))
      j = text(j) == "[" ? matching(j, "[", "]") + 1 : matching(j + 1, "(", ")") + 1;
    if (j >= e || !t_[j].word())
      return j;
    std::string name = text(j);
    unsigned line = t_[j].line;
    ++j;
    if (text(j) == "final")
      ++j;
    bool vertex = false;
    if (text(j) == ":") {
      ++j;
      vertex = vertexBases(j, e);
    }
    while (j < e && text(j) != "{" && text(j) != ";")
      ++j;
    if (text(j) != "{")
      return j + 1;
    std::size_t close = matching(j, "{", "}");
    if (vertex) {
      ClassInfo c;
      c.qualifiedName = ns.empty() ? name : ns + "::" + name;
      c.isTemplate = isTemplate;
      c.line = line;
      c.fields = members(j + 1, close);
      byName_[c.qualifiedName] = classes_.size();
      classes_.push_back(std::move(c));
    }
    return close + 1;
  }

  // Data member names of a class body [b, e).
  std::vector<std::string> members(std::size_t b, std::size_t e) {
    std::vector<std::string> out;
    std::vector<std::size_t> stmt; // token indices of the current declaration
    bool hasParen = false;         // a '(' before any '=': a function declaration
    bool sawAssign = false;
    auto finish = [&]() {
      if (!stmt.empty() && !hasParen)
        declaration(stmt, out);
      stmt.clear();
      hasParen = false;
      sawAssign = false;
    };
    std::size_t i = b;
    while (i < e) {
      const std::string &s = text(i);
      if ((s == "public" || s == "private" || s == "protected") && text(i + 1) == ":" &&
          stmt.empty()) {
        i += 2;
        continue;
      }
      if (s == "template" && stmt.empty() && text(i + 1) == "<") {
        i = skipAngles(i + 1);
        hasParen = true; // a member template: never a data member
        stmt.push_back(i - 1);
        continue;
      }
      if (s == ";") {
        finish();
        ++i;
        continue;
      }
      if (s == "=")
        sawAssign = true;
      if (s == "(") {
        // alignas(16), __attribute__((...)), decltype(x): part of a type, not a call.
        static const std::set<std::string> typeWords = {"alignas", "__attribute__", "decltype",
                                                        "sizeof", "alignof"};
        const bool typePart = !stmt.empty() && typeWords.count(text(stmt.back()));
        if (!sawAssign && !typePart)
          hasParen = true;
        stmt.push_back(i);
        i = matching(i, "(", ")") + 1;
        continue;
      }
      if (s == "{") {
        std::size_t close = matching(i, "{", "}");
        const std::string first = stmt.empty() ? "" : text(stmt.front());
        bool nestedType =
            first == "struct" || first == "class" || first == "union" || first == "enum";
        if (hasParen) {
          // A function body: the declaration ends here unless a ';' follows.
          stmt.clear();
          hasParen = false;
          sawAssign = false;
          i = close + 1;
          if (text(i) == ";")
            ++i;
          continue;
        }
        if (nestedType) {
          // Nested type: what follows up to ';' may declare members of it.
          i = close + 1;
          stmt.clear();
          while (i < e && text(i) != ";")
            ++i;
          ++i;
          continue;
        }
        // Brace initializer of a data member.
        stmt.push_back(i);
        i = close + 1;
        continue;
      }
      stmt.push_back(i);
      ++i;
    }
    return out;
  }

  void declaration(const std::vector<std::size_t> &stmt, std::vector<std::string> &out) {
    static const std::set<std::string> skip = {
        "using",  "typedef", "static", "friend",    "template", "static_assert", "enum",
        "struct", "class",   "union",  "constexpr", "operator", "virtual",       "extern"};
    for (std::size_t k : stmt)
      if (skip.count(text(k)))
        return;
    // Split into declarators at commas outside <...>.
    int angle = 0;
    std::vector<std::size_t> cur;
    auto take = [&]() {
      // Name: the last word before '=', '{' or '['. Bit-fields have no address,
      // so no field can point at them: they are skipped.
      std::string name;
      for (std::size_t k : cur) {
        const std::string &w = text(k);
        if (w == ":") {
          cur.clear();
          return;
        }
        if (w == "=" || w == "{" || w == "[")
          break;
        if (t_[k].word() && !std::isdigit((unsigned char)w[0]))
          name = w;
      }
      static const std::set<std::string> keywords = {"const",  "volatile", "mutable", "unsigned",
                                                     "signed", "int",      "float",   "char",
                                                     "short",  "long",     "bool",    "double"};
      if (!name.empty() && !keywords.count(name))
        out.push_back(name);
      cur.clear();
    };
    bool inInit = false;
    for (std::size_t k : stmt) {
      const std::string &w = text(k);
      if (w == "<" && !inInit)
        ++angle;
      else if (w == ">" && !inInit)
        --angle;
      else if (w == "=")
        inInit = true;
      if (w == "," && angle <= 0) {
        take();
        inInit = false;
        continue;
      }
      cur.push_back(k);
    }
    take();
  }

  std::vector<Token> t_;
  std::string file_;
  std::vector<ClassInfo> classes_;
  std::map<std::string, std::size_t> byName_;
  std::vector<std::pair<std::string, std::string>> instantiations_;
};

std::string cString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

} // namespace

std::string normaliseVertexName(const std::string &name) { return Scanner::normaliseName(name); }

std::vector<ScannedVertex> scanCodelets(const std::string &source, const std::string &fileName) {
  return Scanner(tokenize(source), fileName).run();
}

std::string generateGluePart(unsigned part, const std::string &codeletPath,
                             const std::vector<ScannedVertex> &vertices) {
  // Every table is constexpr, so it is constant-initialised: built by a dynamic initialiser,
  // a part of ~180 vertices (~9,000 field descriptors) took GCC -O3 ~28 min, constexpr ~2.5 min.
  std::ostringstream os;
  os << "// Generated by popsnn: the vertex table of " << codeletPath << "\n"
     << "#include " << cString(codeletPath) << "\n"
     << "#include \"poplar/detail/CodeletABI.hpp\"\n\n"
     << "namespace {\n";
  for (std::size_t v = 0; v < vertices.size(); ++v) {
    const auto &vx = vertices[v];
    std::string alias = "popsnn_v" + std::to_string(v);
    os << "using " << alias << " = " << vx.cppType << ";\n";
    if (!vx.fields.empty()) {
      os << "constexpr popsnn_field_desc " << alias << "_fields[] = {\n";
      for (const auto &f : vx.fields)
        os << "  ::poplar::detail::describeField<" << alias << ", decltype(" << alias << "::" << f
           << ")>(" << cString(f) << ", [](void *v) -> void * { return &static_cast<" << alias
           << " *>(v)->" << f << "; }),\n";
      os << "};\n";
    }
  }
  os << "constexpr popsnn_vertex_desc popsnn_vertices[] = {\n";
  for (std::size_t v = 0; v < vertices.size(); ++v) {
    std::string alias = "popsnn_v" + std::to_string(v);
    os << "  ::poplar::detail::describeVertex<" << alias << ">(" << cString(vertices[v].name)
       << ", " << (vertices[v].fields.empty() ? "nullptr" : alias + "_fields") << ", "
       << vertices[v].fields.size() << "),\n";
  }
  if (vertices.empty())
    os << "  popsnn_vertex_desc{},\n";
  os << "};\n"
     << "constexpr popsnn_codelet_table popsnn_part = {POPSNN_CODELET_ABI_VERSION, "
     << vertices.size() << "u, popsnn_vertices};\n"
     << "} // namespace\n\n"
     << "extern \"C\" const popsnn_codelet_table *popsnn_codelet_part_" << part
     << "() { return &popsnn_part; }\n";
  return os.str();
}

std::string generateGlueMaster(unsigned numParts) {
  std::ostringstream os;
  os << "// Generated by popsnn: the exported table of every part.\n"
     << "#include <vector>\n"
     << "#include \"poplar/detail/CodeletABI.hpp\"\n\n";
  for (unsigned p = 0; p < numParts; ++p)
    os << "extern \"C\" const popsnn_codelet_table *popsnn_codelet_part_" << p << "();\n";
  os << "\nextern \"C\" __attribute__((visibility(\"default\"))) const popsnn_codelet_table *\n"
     << "popsnn_codelet_table_v1() {\n"
     << "  static const popsnn_codelet_table table = [] {\n"
     << "    static std::vector<popsnn_vertex_desc> all;\n"
     << "    const popsnn_codelet_table *parts[] = {";
  for (unsigned p = 0; p < numParts; ++p)
    os << (p ? ", " : "") << "popsnn_codelet_part_" << p << "()";
  if (numParts == 0)
    os << "nullptr";
  os << "};\n"
     << "    for (const popsnn_codelet_table *t : parts)\n"
     << "      if (t) all.insert(all.end(), t->vertices, t->vertices + t->numVertices);\n"
     << "    return popsnn_codelet_table{POPSNN_CODELET_ABI_VERSION, unsigned(all.size()), "
        "all.data()};\n"
     << "  }();\n"
     << "  return &table;\n"
     << "}\n";
  return os.str();
}

} // namespace detail
} // namespace poplar
