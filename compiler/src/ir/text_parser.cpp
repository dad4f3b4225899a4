// Parser for the .graph text format: a hand-written lexer and recursive-descent parser that builds
// the graph through the builder API (so types are inferred as it goes) and reports file:line:col
// errors.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "crucible/ir/op_registry.h"
#include "crucible/ir/text_format.h"

namespace crucible {

ParseError::ParseError(std::string_view file, int line, int col, std::string_view message)
    : Error(fmt::format("{}:{}:{}: {}", file, line, col, message)), line_(line), col_(col) {}

namespace {

enum class Tok { kIdent, kValue, kInt, kFloat, kString, kPunct, kEnd };

struct Token {
  Tok kind;
  std::string text;  // identifier, value name (without %), number text, decoded string, punctuation
  int line;
  int col;
};

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEnd:
      return "end of file";
    case Tok::kValue:
      return "'%" + t.text + "'";
    case Tok::kString:
      return "a string";
    default:
      return "'" + t.text + "'";
  }
}

class Lexer {
 public:
  Lexer(std::string_view text, std::string_view file) : s_(text), file_(file) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space();
      if (pos_ >= s_.size()) {
        out.push_back({Tok::kEnd, "", line_, col_});
        return out;
      }
      out.push_back(next());
    }
  }

 private:
  static bool ident_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
  }
  static bool ident_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  }

  [[noreturn]] void fail(int line, int col, std::string_view msg) {
    throw ParseError(file_, line, col, msg);
  }

  char peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  void advance() {
    if (s_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }

  void skip_space() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') advance();
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        advance();
      } else {
        return;
      }
    }
  }

  Token next() {
    const int line = line_, col = col_;
    const char c = peek();
    if (ident_start(c)) {
      std::string t;
      while (ident_char(peek())) {
        t += peek();
        advance();
      }
      return {Tok::kIdent, t, line, col};
    }
    if (c == '%') {
      advance();
      std::string t;
      while (ident_char(peek())) {
        t += peek();
        advance();
      }
      if (t.empty()) fail(line, col, "expected a value name after '%'");
      return {Tok::kValue, t, line, col};
    }
    if (std::isdigit(static_cast<unsigned char>(c)) ||
        (c == '-' && (std::isdigit(static_cast<unsigned char>(peek(1))) || peek(1) == '.'))) {
      return number(line, col);
    }
    if (c == '"') return string(line, col);
    if (c != '\0' && std::strchr("(){}[],:=-", c) != nullptr) {
      advance();
      return {Tok::kPunct, std::string(1, c), line, col};
    }
    const auto byte = static_cast<unsigned char>(c);
    fail(line, col,
         byte < 0x20 || byte >= 0x7f ? fmt::format("unexpected byte 0x{:02x}", byte)
                                     : fmt::format("unexpected character '{}'", c));
  }

  Token number(int line, int col) {
    std::string t;
    bool is_float = false;
    if (peek() == '-') {
      t += '-';
      advance();
    }
    while (std::isdigit(static_cast<unsigned char>(peek()))) {
      t += peek();
      advance();
    }
    if (peek() == '.') {
      is_float = true;
      t += '.';
      advance();
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        t += peek();
        advance();
      }
    }
    if (peek() == 'e' || peek() == 'E') {
      is_float = true;
      t += peek();
      advance();
      if (peek() == '+' || peek() == '-') {
        t += peek();
        advance();
      }
      if (!std::isdigit(static_cast<unsigned char>(peek())))
        fail(line, col, fmt::format("malformed number '{}'", t));
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        t += peek();
        advance();
      }
    }
    if (ident_start(peek())) fail(line, col, fmt::format("malformed number '{}{}'", t, peek()));
    if (t == "-" || t == "-." || t == ".") fail(line, col, fmt::format("malformed number '{}'", t));
    return {is_float ? Tok::kFloat : Tok::kInt, t, line, col};
  }

  Token string(int line, int col) {
    advance();  // opening quote
    std::string t;
    for (;;) {
      if (pos_ >= s_.size() || peek() == '\n') fail(line, col, "unterminated string");
      char c = peek();
      advance();
      if (c == '"') break;
      if (c == '\\') {
        char e = peek();
        if (pos_ >= s_.size()) fail(line, col, "unterminated string");
        advance();
        switch (e) {
          case 'n':
            t += '\n';
            break;
          case 't':
            t += '\t';
            break;
          case '"':
          case '\\':
            t += e;
            break;
          default:
            fail(line_, col_ - 2, fmt::format("unknown escape '\\{}' in string", e));
        }
      } else {
        t += c;
      }
    }
    return {Tok::kString, t, line, col};
  }

  std::string_view s_;
  std::string_view file_;
  size_t pos_ = 0;
  int line_ = 1;
  int col_ = 1;
};

class Parser {
 public:
  Parser(std::vector<Token> toks, std::string_view file) : t_(std::move(toks)), file_(file) {}

  Graph run() {
    expect_keyword("graph");
    const Token& name = expect(Tok::kIdent, "a graph name");
    Graph g(name.text);
    expect_punct("(");
    if (!accept_punct(")")) {
      do {
        parse_input(g);
      } while (accept_punct(","));
      expect_punct(")");
    }
    expect_punct("{");
    bool returned = false;
    while (!is_punct("}")) {
      const Token& t = peek();
      if (t.kind == Tok::kEnd) fail(t, "expected '}' to close the graph");
      if (returned) fail(t, fmt::format("unexpected {} after return", describe(t)));
      if (t.kind == Tok::kIdent && t.text == "param") {
        parse_param(g);
      } else if (t.kind == Tok::kIdent && t.text == "gradients") {
        parse_gradients(g);
      } else if (t.kind == Tok::kIdent && t.text == "return") {
        parse_return(g);
        returned = true;
      } else if (t.kind == Tok::kValue) {
        parse_node(g);
      } else {
        fail(t,
             fmt::format("expected 'param', a %value definition, 'gradients' or 'return', got {}",
                         describe(t)));
      }
    }
    const Token& close = next();
    if (!returned) fail(close, "graph has no return statement");
    if (peek().kind != Tok::kEnd)
      fail(peek(), fmt::format("unexpected {} after the graph", describe(peek())));
    try {
      verify(g);
    } catch (const GraphError& e) {
      fail(close, e.what());
    }
    return g;
  }

 private:
  [[noreturn]] void fail(const Token& t, std::string_view msg) {
    throw ParseError(file_, t.line, t.col, msg);
  }

  const Token& peek() const { return t_[i_]; }
  const Token& next() {
    const Token& t = t_[i_];
    if (t.kind != Tok::kEnd) ++i_;
    return t;
  }
  bool is_punct(std::string_view p) const { return peek().kind == Tok::kPunct && peek().text == p; }
  bool accept_punct(std::string_view p) {
    if (!is_punct(p)) return false;
    next();
    return true;
  }
  void expect_punct(std::string_view p) {
    if (!accept_punct(p)) fail(peek(), fmt::format("expected '{}', got {}", p, describe(peek())));
  }
  const Token& expect(Tok kind, std::string_view what) {
    if (peek().kind != kind)
      fail(peek(), fmt::format("expected {}, got {}", what, describe(peek())));
    return next();
  }
  void expect_keyword(std::string_view kw) {
    if (peek().kind != Tok::kIdent || peek().text != kw) {
      fail(peek(), fmt::format("expected '{}', got {}", kw, describe(peek())));
    }
    next();
  }

  int64_t to_int(const Token& t) {
    errno = 0;
    char* end = nullptr;
    long long v = std::strtoll(t.text.c_str(), &end, 10);
    if (errno == ERANGE) fail(t, fmt::format("integer '{}' is out of range", t.text));
    return v;
  }

  TensorType parse_type() {
    const Token& dt = expect(Tok::kIdent, "a dtype");
    auto dtype = parse_dtype(dt.text);
    if (!dtype)
      fail(dt, fmt::format("unknown dtype '{}' (expected f32, f64, bf16, i64, i32, u8 or bool)",
                           dt.text));
    expect_punct("[");
    Shape shape;
    if (!accept_punct("]")) {
      do {
        const Token& d = expect(Tok::kInt, "a dimension size");
        int64_t v = to_int(d);
        if (v < 0) fail(d, fmt::format("dimension size {} is negative", v));
        shape.push_back(v);
      } while (accept_punct(","));
      expect_punct("]");
    }
    try {
      check_shape_bytes(shape, dtype_size(*dtype));
    } catch (const Error& e) {
      fail(dt, e.what());
    }
    return {*dtype, shape};
  }

  AttrValue parse_attr_value() {
    const Token& t = peek();
    if (t.kind == Tok::kInt) return to_int(next());
    if (t.kind == Tok::kFloat) return std::strtod(next().text.c_str(), nullptr);
    if (t.kind == Tok::kString) return next().text;
    if (t.kind == Tok::kPunct && t.text == "-") {
      next();
      if (peek().kind == Tok::kIdent && peek().text == "inf") {
        next();
        return -INFINITY;
      }
      fail(t, "expected a number after '-'");
    }
    if (t.kind == Tok::kPunct && t.text == "[") {
      next();
      std::vector<int64_t> list;
      if (!accept_punct("]")) {
        do {
          list.push_back(to_int(expect(Tok::kInt, "an integer")));
        } while (accept_punct(","));
        expect_punct("]");
      }
      return list;
    }
    if (t.kind == Tok::kIdent) {
      next();
      if (t.text == "true") return true;
      if (t.text == "false") return false;
      if (t.text == "inf") return INFINITY;
      if (t.text == "nan") return NAN;
      if (auto dt = parse_dtype(t.text)) return *dt;
      fail(t, fmt::format(
                  "unknown name '{}' as a value (expected a number, string, list, bool or dtype)",
                  t.text));
    }
    fail(t, fmt::format("expected an attribute value, got {}", describe(t)));
  }

  // name=value pairs up to ')' (the '(' is already consumed); `allow_operands` lets %values come
  // first.
  void parse_args(std::vector<const Token*>* operands, Attrs& attrs) {
    if (accept_punct(")")) return;
    do {
      const Token& t = peek();
      if (t.kind == Tok::kValue) {
        if (operands == nullptr) fail(t, "a value is not allowed here");
        if (!attrs.empty()) fail(t, "operands must come before attributes");
        operands->push_back(&next());
      } else if (t.kind == Tok::kIdent) {
        next();
        expect_punct("=");
        if (attrs.has(t.text)) fail(t, fmt::format("attribute '{}' given twice", t.text));
        attrs.set(t.text, parse_attr_value());
      } else {
        fail(t, fmt::format("expected an operand or name=value, got {}", describe(t)));
      }
    } while (accept_punct(","));
    expect_punct(")");
  }

  Initializer parse_initializer() {
    const Token& kind = expect(Tok::kIdent, "an initializer such as randn(...)");
    static const char* kKinds[] = {"randn", "uniform", "randint", "zeros", "ones", "full", "file"};
    if (std::find_if(std::begin(kKinds), std::end(kKinds),
                     [&](const char* k) { return kind.text == k; }) == std::end(kKinds)) {
      fail(kind, fmt::format("unknown initializer '{}' (expected randn, uniform, randint, zeros, "
                             "ones, full or file)",
                             kind.text));
    }
    expect_punct("(");
    Initializer init{kind.text, {}};
    parse_args(nullptr, init.args);
    return init;
  }

  void parse_input(Graph& g) {
    const Token& name = expect(Tok::kValue, "an input such as %x: f32[2,3]");
    expect_punct(":");
    TensorType type = parse_type();
    Initializer recipe;
    const Token* at = nullptr;
    if (accept_punct("=")) {
      at = &peek();
      recipe = parse_initializer();
      check_recipe(*at, "input", name, recipe, type);
    }
    const ValueId id = define(name, [&] { return g.add_input(name.text, type, recipe); });
    if (at != nullptr) g.set_source(id, {at->line, at->col});
  }

  void parse_param(Graph& g) {
    next();  // 'param'
    const Token& name = expect(Tok::kValue, "a parameter name such as %w");
    expect_punct(":");
    TensorType type = parse_type();
    expect_punct("=");
    const Token& at = peek();
    Initializer init = parse_initializer();
    check_recipe(at, "parameter", name, init, type);
    const ValueId id = define(name, [&] { return g.add_param(name.text, type, init); });
    g.set_source(id, {at.line, at.col});
  }

  void check_recipe(const Token& at, std::string_view what, const Token& name,
                    const Initializer& init, const TensorType& type) {
    try {
      check_initializer(init, type);
    } catch (const Error& e) {
      fail(at, fmt::format("{} %{}: {}", what, name.text, e.what()));
    }
  }

  void parse_node(Graph& g) {
    const Token& name = next();
    std::optional<TensorType> declared;
    const Token* type_tok = nullptr;
    if (accept_punct(":")) {
      type_tok = &peek();
      declared = parse_type();
    }
    expect_punct("=");
    const Token& op = expect(Tok::kIdent, "an op name");
    if (OpRegistry::global().find(op.text) == nullptr)
      fail(op, fmt::format("unknown op '{}'", op.text));
    expect_punct("(");
    std::vector<const Token*> operand_toks;
    Attrs attrs;
    parse_args(&operand_toks, attrs);
    std::vector<ValueId> operands;
    operands.reserve(operand_toks.size());
    for (const Token* t : operand_toks) operands.push_back(lookup(g, *t));
    ValueId id;
    try {
      id = define(name, [&] {
        return g.add_node(op.text, operands, attrs, name.text, {op.line, op.col});
      });
    } catch (const GraphError& e) {
      fail(op, e.what());
    }
    if (declared && *declared != g.value(id).type) {
      fail(*type_tok, fmt::format("%{} is declared {} but {} gives {}", name.text, declared->str(),
                                  op.text, g.value(id).type.str()));
    }
  }

  // gradients(%loss wrt %a, %b) = %ga, %gb
  void parse_gradients(Graph& g) {
    next();  // 'gradients'
    expect_punct("(");
    GradientSet set;
    set.loss = lookup(g, expect(Tok::kValue, "the %loss"));
    expect_keyword("wrt");
    do {
      set.wrt.push_back(lookup(g, expect(Tok::kValue, "a %value the gradient is taken by")));
    } while (accept_punct(","));
    expect_punct(")");
    expect_punct("=");
    do {
      set.grads.push_back(lookup(g, expect(Tok::kValue, "a %gradient")));
    } while (accept_punct(","));
    g.add_gradients(std::move(set));
  }

  void parse_return(Graph& g) {
    next();  // 'return'
    std::vector<ValueId> outs;
    do {
      outs.push_back(lookup(g, expect(Tok::kValue, "a %value to return")));
    } while (accept_punct(","));
    g.set_outputs(outs);
  }

  ValueId lookup(const Graph& g, const Token& t) {
    auto id = g.find_value(t.text);
    if (!id) fail(t, fmt::format("undefined value %{}", t.text));
    return *id;
  }

  template <typename F>
  ValueId define(const Token& name, F&& add) {
    if (names_.contains(name.text))
      fail(name, fmt::format("value %{} is defined twice", name.text));
    names_.insert(name.text);
    return add();
  }

  std::vector<Token> t_;
  std::string_view file_;
  size_t i_ = 0;
  std::unordered_set<std::string> names_;
};

}  // namespace

Graph parse_graph(std::string_view text, std::string_view file) {
  Graph g = Parser(Lexer(text, file).run(), file).run();
  g.set_source_file(std::string(file));
  return g;
}

Graph load_graph_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw Error(fmt::format("{}: is a directory, not a .graph file", path.string()));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot read: {}", path.string(), std::strerror(errno)));
  std::stringstream buf;
  buf << in.rdbuf();
  Graph g = parse_graph(buf.str(), path.string());
  g.set_base_dir(path.parent_path());
  return g;
}

}  // namespace crucible
