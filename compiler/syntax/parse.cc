// ANTLR parse tree → AST. The only file that includes generated code.
//
// 1. Validate UTF-8 (ANTLR's decoder throws on bad input) and the size cap.
// 2. Lex; report stray characters and nesting deeper than kMaxNesting —
//    the parser recurses once per level, so this bounds its stack.
// 3. Parse with an error listener that turns ANTLR's messages into
//    diagnostics; ANTLR's default strategy recovers and continues.
// 4. Walk the tree into ast.h nodes (depth-capped as well).
#include "compiler/syntax/parse.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <exception>

#include "DtlLexer.h"
#include "DtlParser.h"
#include "antlr4-runtime.h"

namespace dtl::syntax {

namespace {

using P = dtl_gen::DtlParser;
constexpr size_t kMaxFileBytes = 4u << 20;
constexpr int kMaxExprDepth = 1000;

Loc tokenLoc(int file, antlr4::Token* t) {
  Loc l;
  l.file = file;
  l.line = static_cast<int>(t->getLine());
  l.col = static_cast<int>(t->getCharPositionInLine()) + 1;
  size_t len = t->getType() == antlr4::Token::EOF ? 1 : t->getText().size();
  l.len = static_cast<int>(len == 0 ? 1 : len);
  return l;
}

Loc ctxLoc(int file, antlr4::ParserRuleContext* c) {
  Loc l = tokenLoc(file, c->getStart());
  antlr4::Token* stop = c->getStop();
  if (stop && stop->getLine() == c->getStart()->getLine() &&
      stop->getStopIndex() >= c->getStart()->getStartIndex())
    l.len = static_cast<int>(stop->getStopIndex() - c->getStart()->getStartIndex() + 1);
  return l;
}

// "'model'" → "`model`", "ID" → "a name", for expected-token lists.
std::string tokenDisplay(const std::string& name) {
  if (name.size() >= 2 && name.front() == '\'' && name.back() == '\'')
    return "`" + name.substr(1, name.size() - 2) + "`";
  if (name == "ID") return "a name";
  if (name == "NUMBER") return "a number";
  if (name == "QUANTITY") return "a quantity";
  if (name == "STRING") return "a string";
  if (name == "EOF" || name == "<EOF>") return "end of file";
  return name;
}

std::string foundText(antlr4::Token* t) {
  if (!t || t->getType() == antlr4::Token::EOF) return "end of file";
  std::string s = t->getText();
  if (s.size() > 24) s = s.substr(0, 24) + "…";
  return "`" + s + "`";
}

// Words that start a declaration: met inside a block, they usually mean the
// block's `}` is missing.
bool startsDecl(const std::string& s) {
  return s == "import" || s == "layer" || s == "model" || s == "data" || s == "train" || s == "parallel";
}

// ANTLR's recovery, except that a declaration keyword inside a block is not
// skipped as junk: the block's `}` is then reported missing (and inserted),
// and the next declaration parses normally.
class Recovery : public antlr4::DefaultErrorStrategy {
 public:
  void sync(antlr4::Parser* parser) override {
    antlr4::Token* t = parser->getCurrentToken();
    if (t && t->getType() != P::ID && startsDecl(t->getText())) {
      bool expected = false;
      try {
        expected = parser->getExpectedTokens().contains(t->getType());
      } catch (...) {
      }
      if (!expected) return;
    }
    DefaultErrorStrategy::sync(parser);
  }
};

class ErrorListener : public antlr4::BaseErrorListener {
 public:
  ErrorListener(int file, diag::Diagnostics& diags, std::vector<size_t> lexical_errors)
      : file_(file), diags_(diags), lexical_errors_(std::move(lexical_errors)) {}

  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token* offending, size_t line,
                   size_t col, const std::string& msg, std::exception_ptr) override {
    auto* parser = dynamic_cast<antlr4::Parser*>(recognizer);
    // One error per token: ANTLR may report the same token twice while it
    // recovers ("extraneous" and then "missing").
    if (offending && offending->getType() != antlr4::Token::EOF) {
      if (offending->getTokenIndex() == last_index_) return;
      last_index_ = offending->getTokenIndex();
    }
    if (parser && offending && afterLexicalError(parser, offending)) return;
    Loc l;
    l.file = file_;
    l.line = static_cast<int>(line);
    l.col = static_cast<int>(col) + 1;
    l.len = 1;
    if (offending && offending->getType() != antlr4::Token::EOF)
      l.len = static_cast<int>(std::max<size_t>(1, offending->getText().size()));
    std::string expected;
    std::vector<std::string> keywords;  // expected words, for a did-you-mean
    bool expects_close = false;
    if (parser) {
      antlr4::misc::IntervalSet set;
      try {
        set = parser->getExpectedTokens();
      } catch (...) {
      }
      std::vector<std::string> names;
      auto add = [&](const std::string& n) {
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
      };
      for (ssize_t t : set.toList()) {
        std::string n = parser->getVocabulary().getDisplayName(t);
        if (n == "UNKNOWN" || n == "COMMENT" || n == "WS" || n == "';'") continue;
        // `over`, `every` and `keep` are names outside their statements.
        if (n == "'over'" || n == "'every'" || n == "'keep'") n = "ID";
        if (n.size() > 2 && n.front() == '\'' && std::isalpha(static_cast<unsigned char>(n[1])))
          keywords.push_back(n.substr(1, n.size() - 2));
        if (n == "'}'") expects_close = true;
        add(tokenDisplay(n));
      }
      // End of file is worth naming only when nothing else fits.
      if (names.size() > 1) names.erase(std::remove(names.begin(), names.end(), "end of file"), names.end());
      if (!names.empty() && names.size() <= 6) {
        for (size_t i = 0; i < names.size(); ++i) {
          if (i) expected += i + 1 == names.size() ? " or " : ", ";
          expected += names[i];
        }
      }
    }
    std::string message;
    if (expects_close && offending && offending->getType() == antlr4::Token::EOF) {
      message = "expected `}` before end of file";
    } else if (msg.rfind("missing ", 0) == 0 && !expected.empty()) {
      message = "expected " + expected + " before " + foundText(offending);
    } else if (!expected.empty()) {
      message = "expected " + expected + ", found " + foundText(offending);
    } else {
      message = "unexpected " + foundText(offending);
    }
    std::string hint;
    if (offending && offending->getType() != P::ID && startsDecl(offending->getText()))
      hint = "`" + offending->getText() + "` starts a declaration; is a `}` missing above?";
    else if (offending && offending->getType() == P::ID)
      hint = diag::didYouMean(offending->getText(), keywords);
    diag::Diagnostic& d = diags_.error(l, message, hint);
    // Point at the `{` that a missing `}` would close.
    bool missing_close = expects_close && (expected == "`}`" || !offending ||
                                           offending->getType() == antlr4::Token::EOF ||
                                           (offending->getType() != P::ID && startsDecl(offending->getText())));
    if (missing_close && parser && parser->getContext()) {
      antlr4::Token* open = nullptr;
      for (antlr4::tree::ParseTree* ctx = parser->getContext(); ctx && !open; ctx = ctx->parent) {
        for (antlr4::tree::ParseTree* ch : ctx->children) {
          auto* term = dynamic_cast<antlr4::tree::TerminalNode*>(ch);
          if (term && term->getSymbol()->getText() == "{") open = term->getSymbol();
        }
      }
      if (open) {
        diag::Diagnostic note;
        note.severity = diag::Severity::Note;
        note.loc = tokenLoc(file_, open);
        note.message = "to match this `{`";
        d.notes.push_back(std::move(note));
      }
    }
  }

 private:
  // A syntax error in a declaration that already has a lexical error (an
  // unterminated string, a stray character) is most likely its echo.
  bool afterLexicalError(antlr4::Parser* parser, antlr4::Token* offending) const {
    if (lexical_errors_.empty()) return false;
    size_t start = 0;
    antlr4::ParserRuleContext* ctx = parser->getContext();
    while (ctx && ctx->parent && dynamic_cast<P::FileContext*>(ctx->parent) == nullptr)
      ctx = dynamic_cast<antlr4::ParserRuleContext*>(ctx->parent);
    if (auto* file = dynamic_cast<P::FileContext*>(ctx)) {
      // Between declarations: the one before it may have run over.
      std::vector<P::DeclContext*> decls = file->decl();
      if (!decls.empty() && decls.back()->getStart()) start = decls.back()->getStart()->getTokenIndex();
    } else if (ctx && ctx->getStart()) {
      start = ctx->getStart()->getTokenIndex();
    }
    size_t at = offending->getTokenIndex();
    for (size_t e : lexical_errors_)
      if (e >= start && e <= at) return true;
    return false;
  }

  int file_;
  diag::Diagnostics& diags_;
  std::vector<size_t> lexical_errors_;  // token indexes
  size_t last_index_ = static_cast<size_t>(-1);
};

bool validUtf8(const std::string& s, size_t& bad) {
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0 || i + n >= s.size() + (n == 0 ? 1 : 0)) {
      bad = i;
      return false;
    }
    for (int k = 1; k <= n; ++k) {
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) >> 6) != 2) {
        bad = i;
        return false;
      }
    }
    // Overlong forms and surrogates make ANTLR's converter throw too.
    if (n == 1 && c < 0xC2) { bad = i; return false; }
    if (n == 2) {
      unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) { bad = i; return false; }
    }
    if (n == 3) {
      unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      if ((c == 0xF0 && c1 < 0x90) || c > 0xF4 || (c == 0xF4 && c1 >= 0x90)) { bad = i; return false; }
    }
    i += static_cast<size_t>(n) + 1;
  }
  return true;
}

Loc byteLoc(const diag::SourceManager& src, int file, size_t offset) {
  const std::string& t = src.text(file);
  Loc l;
  l.file = file;
  l.line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset && i < t.size(); ++i)
    if (t[i] == '\n') {
      ++l.line;
      line_start = i + 1;
    }
  l.col = static_cast<int>(offset - line_start) + 1;
  return l;
}

bool isOperandEnd(antlr4::Token* t) {
  size_t type = t->getType();
  if (type == P::ID || type == P::NUMBER || type == P::QUANTITY || type == P::STRING) return true;
  const std::string s = t->getText();
  return s == ")" || s == "]" || s == "}" || s == "true" || s == "false";
}

// Step 2: stray characters and a nesting bound that covers every way the
// parser recurses (brackets, prefix operators, `repeat`, `->` chains).
bool scanTokens(int file, antlr4::CommonTokenStream& tokens, diag::Diagnostics& diags,
                std::vector<size_t>& lexical_errors) {
  std::vector<int> bases;
  int depth = 0;
  antlr4::Token* prev = nullptr;
  size_t string_line = 0;  // the line of an unterminated string: the rest is its text
  for (antlr4::Token* t : tokens.getTokens()) {
    if (string_line && t->getLine() == string_line && t->getType() != antlr4::Token::EOF) {
      if (auto* w = dynamic_cast<antlr4::WritableToken*>(t)) w->setChannel(antlr4::Token::HIDDEN_CHANNEL);
      continue;
    }
    if (t->getType() == P::UNKNOWN) {
      std::string s = t->getText();
      lexical_errors.push_back(t->getTokenIndex());
      if (s == "\"") {
        diags.error(tokenLoc(file, t), "unterminated string", "a string ends with `\"` on the same line");
        string_line = t->getLine();
      } else {
        diags.error(tokenLoc(file, t), "unexpected character `" + s + "`");
      }
      continue;
    }
    if (t->getChannel() != antlr4::Token::DEFAULT_CHANNEL) continue;
    const std::string s = t->getText();
    if (s == "(" || s == "[" || s == "{") {
      bases.push_back(depth);
      ++depth;
    } else if (s == ")" || s == "]" || s == "}") {
      if (!bases.empty()) {
        depth = bases.back();
        bases.pop_back();
      }
    } else if (((s == "-" || s == "+" || s == "!") && (!prev || !isOperandEnd(prev))) ||
               s == "repeat" || s == "->" || s == ".") {
      ++depth;
    } else if (s == "," || s == "=" || s == "*" || s == "/" || s == "@" || s == "+" || s == "-" ||
               s == ".." || s == "==" || s == "!=" || s == "<" || s == "<=" || s == ">" ||
               s == ">=" || s == "&&" || s == "||") {
      depth = bases.empty() ? 0 : bases.back() + 1;
    }
    if (depth > kMaxNesting) {
      diags.error(tokenLoc(file, t),
                  "nesting deeper than " + std::to_string(kMaxNesting) + " levels",
                  "split the expression with `let` or intermediate bindings");
      return false;
    }
    prev = t;
  }
  return true;
}

// Step 4: the tree walk.
class Builder {
 public:
  Builder(const diag::SourceManager& src, int file, diag::Diagnostics& diags)
      : src_(src), file_(file), diags_(diags) {}

  Module build(P::FileContext* f) {
    Module m;
    m.file = file_;
    for (P::DeclContext* d : f->decl()) decl(d, m);
    return m;
  }

  ExprPtr expr(P::ExprContext* c) {
    if (!c) return errorExpr(Loc{file_, 0, 0, 1});
    if (++depth_ > kMaxExprDepth) {
      --depth_;
      if (!depth_reported_) {
        depth_reported_ = true;
        diags_.error(ctxLoc(file_, c), "expression nested deeper than " +
                                           std::to_string(kMaxExprDepth) + " levels",
                     "split the expression with `let` or intermediate bindings");
      }
      return errorExpr(ctxLoc(file_, c));
    }
    ExprPtr e = exprInner(c);
    --depth_;
    return e;
  }

 private:
  Ident ident(P::IdentContext* c) {
    if (!c) return Ident{"<error>", Loc{file_, 0, 0, 1}};
    return Ident{c->getText(), ctxLoc(file_, c)};
  }

  ExprPtr errorExpr(Loc l) {
    auto e = std::make_unique<Expr>();
    e->kind = Expr::Kind::Error;
    e->loc = l;
    return e;
  }

  ExprPtr make(Expr::Kind k, antlr4::ParserRuleContext* c) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->loc = ctxLoc(file_, c);
    return e;
  }

  std::string unescape(const std::string& lit) {
    std::string out;
    for (size_t i = 1; i + 1 < lit.size(); ++i) {
      if (lit[i] == '\\' && i + 2 < lit.size()) {
        char n = lit[++i];
        out += n == 'n' ? '\n' : n == 't' ? '\t' : n;
      } else {
        out += lit[i];
      }
    }
    return out;
  }

  static bool isIntText(const std::string& s) {
    return s.find_first_of(".eE") == std::string::npos;
  }

  ExprPtr exprInner(P::ExprContext* c) {
    if (auto* x = dynamic_cast<P::PrimaryExprContext*>(c)) return primary(x->primary());
    if (auto* x = dynamic_cast<P::MemberExprContext*>(c)) {
      auto e = make(Expr::Kind::Member, c);
      e->kids.push_back(expr(x->expr()));
      Ident id = ident(x->ident());
      e->text = id.name;
      return e;
    }
    if (auto* x = dynamic_cast<P::CallExprContext*>(c)) {
      auto e = make(Expr::Kind::Call, c);
      e->kids.push_back(expr(x->expr()));
      if (x->args()) {
        for (P::ArgContext* a : x->args()->arg()) {
          if (a->ident()) {
            Ident n = ident(a->ident());
            e->arg_names.push_back(n.name);
            e->arg_name_locs.push_back(n.loc);
          } else {
            e->arg_names.emplace_back();
            e->arg_name_locs.push_back(ctxLoc(file_, a));
          }
          e->kids.push_back(expr(a->expr()));
        }
      }
      return e;
    }
    if (auto* x = dynamic_cast<P::UnaryExprContext*>(c)) {
      auto e = make(Expr::Kind::Unary, c);
      e->text = x->op ? x->op->getText() : "-";
      e->kids.push_back(expr(x->expr()));
      return e;
    }
    auto binary = [&](antlr4::ParserRuleContext* ctx, const std::string& op,
                      std::vector<P::ExprContext*> kids, Expr::Kind kind) {
      auto e = make(kind, ctx);
      e->text = op;
      for (auto* k : kids) e->kids.push_back(expr(k));
      while (e->kids.size() < 2) e->kids.push_back(errorExpr(e->loc));
      // Point at the operator: that is where a mismatch is reported.
      for (auto* ch : ctx->children) {
        auto* term = dynamic_cast<antlr4::tree::TerminalNode*>(ch);
        if (term && term->getSymbol()->getText() == op) {
          e->loc = tokenLoc(file_, term->getSymbol());
          break;
        }
      }
      return e;
    };
    if (auto* x = dynamic_cast<P::MulExprContext*>(c))
      return binary(c, x->op ? x->op->getText() : "*", x->expr(), Expr::Kind::Binary);
    if (auto* x = dynamic_cast<P::AddExprContext*>(c))
      return binary(c, x->op ? x->op->getText() : "+", x->expr(), Expr::Kind::Binary);
    if (auto* x = dynamic_cast<P::CompareExprContext*>(c))
      return binary(c, x->op ? x->op->getText() : "==", x->expr(), Expr::Kind::Binary);
    if (auto* x = dynamic_cast<P::AndExprContext*>(c)) return binary(c, "&&", x->expr(), Expr::Kind::Binary);
    if (auto* x = dynamic_cast<P::OrExprContext*>(c)) return binary(c, "||", x->expr(), Expr::Kind::Binary);
    if (auto* x = dynamic_cast<P::RangeExprContext*>(c)) return binary(c, "..", x->expr(), Expr::Kind::Range);
    if (auto* x = dynamic_cast<P::ArrowExprContext*>(c)) return binary(c, "->", x->expr(), Expr::Kind::Arrow);
    return errorExpr(ctxLoc(file_, c));
  }

  ExprPtr primary(P::PrimaryContext* c) {
    if (!c) return errorExpr(Loc{file_, 0, 0, 1});
    if (dynamic_cast<P::NumberLitContext*>(c)) {
      auto e = make(Expr::Kind::Number, c);
      std::string t = c->getText();
      e->number = std::strtod(t.c_str(), nullptr);
      e->is_int = isIntText(t);
      return e;
    }
    if (dynamic_cast<P::QuantityLitContext*>(c)) {
      auto e = make(Expr::Kind::Quantity, c);
      std::string t = c->getText();
      size_t i = 0;
      while (i < t.size() && (isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.' ||
                              ((t[i] == 'e' || t[i] == 'E') && i + 1 < t.size() &&
                               (isdigit(static_cast<unsigned char>(t[i + 1])) || t[i + 1] == '-' || t[i + 1] == '+')) ||
                              ((t[i] == '-' || t[i] == '+') && i > 0 && (t[i - 1] == 'e' || t[i - 1] == 'E'))))
        ++i;
      std::string num = t.substr(0, i);
      size_t j = i;
      while (j < t.size() && (t[j] == ' ' || t[j] == '\t')) ++j;
      e->number = std::strtod(num.c_str(), nullptr);
      e->is_int = isIntText(num);
      e->text = t.substr(j);
      return e;
    }
    if (dynamic_cast<P::StringLitContext*>(c)) {
      auto e = make(Expr::Kind::String, c);
      e->text = unescape(c->getText());
      return e;
    }
    if (dynamic_cast<P::BoolLitContext*>(c)) {
      auto e = make(Expr::Kind::Bool, c);
      e->number = c->getText() == "true" ? 1 : 0;
      e->is_int = true;
      return e;
    }
    if (auto* x = dynamic_cast<P::NameRefContext*>(c)) {
      auto e = make(Expr::Kind::Name, c);
      e->text = ident(x->ident()).name;
      return e;
    }
    if (auto* x = dynamic_cast<P::RepeatExprContext*>(c)) {
      auto e = make(Expr::Kind::Repeat, c);
      e->loc.len = 6;
      std::vector<P::ExprContext*> kids = x->expr();
      for (auto* k : kids) e->kids.push_back(expr(k));
      while (e->kids.size() < 2) e->kids.push_back(errorExpr(e->loc));
      return e;
    }
    if (auto* x = dynamic_cast<P::ParenExprContext*>(c)) return expr(x->expr());
    if (auto* x = dynamic_cast<P::TupleExprContext*>(c)) {
      auto e = make(Expr::Kind::Tuple, c);
      for (auto* k : x->expr()) e->kids.push_back(expr(k));
      return e;
    }
    return errorExpr(ctxLoc(file_, c));
  }

  TensorType tensorType(P::TensorTypeContext* c) {
    TensorType t;
    if (!c) return t;
    t.loc = ctxLoc(file_, c);
    if (c->ident()) t.elem = ident(c->ident());
    if (c->names())
      for (auto* n : c->names()->ident()) t.dims.push_back(ident(n));
    return t;
  }

  std::vector<Ident> names(P::NamesContext* c) {
    std::vector<Ident> out;
    if (c)
      for (auto* n : c->ident()) out.push_back(ident(n));
    return out;
  }

  void bodyItem(P::BodyItemContext* c, LayerDecl& l) {
    if (auto* x = dynamic_cast<P::DimDeclContext*>(c)) {
      for (auto* d : x->dimDef()) l.dims.push_back(DimDef{ident(d->ident()), expr(d->expr())});
    } else if (auto* x = dynamic_cast<P::ParamDeclContext*>(c)) {
      ParamDecl p;
      p.name = ident(x->ident());
      p.type = tensorType(x->tensorType());
      p.init = expr(x->initExpr);
      if (x->cond) p.cond = expr(x->cond);
      l.params.push_back(std::move(p));
    } else if (auto* x = dynamic_cast<P::InputDeclContext*>(c)) {
      l.inputs.push_back(InputDecl{ident(x->ident()), tensorType(x->tensorType())});
    } else if (auto* x = dynamic_cast<P::MetricDeclContext*>(c)) {
      l.bindings.push_back(Binding{ident(x->ident()), expr(x->expr()), true});
    } else if (auto* x = dynamic_cast<P::BindingContext*>(c)) {
      l.bindings.push_back(Binding{ident(x->ident()), expr(x->expr()), false});
    } else if (auto* x = dynamic_cast<P::ForwardExprContext*>(c)) {
      Forward f;
      f.loc = tokenLoc(file_, x->getStart());
      f.params = names(x->names());
      f.result = expr(x->expr());
      f.body_end = f.loc;
      l.forwards.push_back(std::move(f));
    } else if (auto* x = dynamic_cast<P::ForwardBlockContext*>(c)) {
      Forward f;
      f.loc = tokenLoc(file_, x->getStart());
      f.params = names(x->names());
      f.body_end = x->getStop() ? tokenLoc(file_, x->getStop()) : f.loc;
      for (auto* s : x->stmt()) {
        if (auto* let = dynamic_cast<P::LetStmtContext*>(s)) {
          f.lets.push_back(Let{ident(let->ident()), expr(let->expr())});
        } else if (auto* ret = dynamic_cast<P::ReturnStmtContext*>(s)) {
          if (f.result)
            diags_.error(ctxLoc(file_, ret), "a second `return` in one forward",
                         "a forward returns once, at its end");
          else
            f.result = expr(ret->expr());
        }
      }
      l.forwards.push_back(std::move(f));
    }
  }

  void decl(P::DeclContext* c, Module& m) {
    if (auto* x = dynamic_cast<P::ImportDeclContext*>(c)) {
      if (!x->STRING()) return;  // reported as a syntax error
      Import imp;
      imp.loc = tokenLoc(file_, x->STRING()->getSymbol());
      imp.path = unescape(x->STRING()->getText());
      m.imports.push_back(std::move(imp));
    } else if (auto* x = dynamic_cast<P::LayerDeclContext*>(c)) {
      LayerDecl l;
      l.name = ident(x->ident());
      if (x->layerArgs()) {
        for (auto* a : x->layerArgs()->layerArg()) {
          LayerArg arg;
          arg.name = ident(a->ident());
          if (a->argType()) {
            arg.type = a->argType()->ident() ? ident(a->argType()->ident())
                                              : Ident{"dim", ctxLoc(file_, a->argType())};
          }
          if (a->expr()) arg.default_value = expr(a->expr());
          l.args.push_back(std::move(arg));
        }
      }
      for (auto* b : x->bodyItem()) bodyItem(b, l);
      m.layers.push_back(std::move(l));
    } else if (auto* x = dynamic_cast<P::ModelDeclContext*>(c)) {
      LayerDecl l;
      l.name = ident(x->ident());
      l.is_model = true;
      for (auto* b : x->bodyItem()) bodyItem(b, l);
      m.layers.push_back(std::move(l));
    } else if (auto* x = dynamic_cast<P::DataDeclContext*>(c)) {
      DataDecl d;
      d.loc = tokenLoc(file_, c->getStart());
      for (auto* item : x->dataItem()) {
        if (auto* s = dynamic_cast<P::DataSplitContext*>(item)) {
          DataSplit split;
          split.name = Ident{s->children.empty() ? "" : s->children[0]->getText(),
                             tokenLoc(file_, s->getStart())};
          for (auto* f : s->splitItem()) {
            if (auto* fb = dynamic_cast<P::FieldBindingContext*>(f))
              split.fields.push_back(DataField{ident(fb->ident()), expr(fb->expr())});
            else if (auto* fs = dynamic_cast<P::FieldSourceContext*>(f))
              split.fields.push_back(DataField{std::nullopt, expr(fs->expr())});
          }
          d.splits.push_back(std::move(split));
        } else if (auto* s = dynamic_cast<P::DataSettingContext*>(item)) {
          d.settings.push_back(Setting{ident(s->ident()), expr(s->expr())});
        }
      }
      m.data.push_back(std::move(d));
    } else if (auto* x = dynamic_cast<P::TrainDeclContext*>(c)) {
      TrainDecl t;
      t.loc = tokenLoc(file_, c->getStart());
      for (auto* item : x->trainItem()) {
        if (auto* s = dynamic_cast<P::TrainSettingContext*>(item)) {
          t.settings.push_back(Setting{ident(s->ident()), expr(s->expr())});
        } else if (auto* s = dynamic_cast<P::TrainEveryContext*>(item)) {
          EveryItem e;
          e.what = ident(s->ident());
          if (s->target) e.target = expr(s->target);
          e.every = expr(s->period);
          if (s->count) e.keep = expr(s->count);
          t.every.push_back(std::move(e));
        }
      }
      m.train.push_back(std::move(t));
    } else if (auto* x = dynamic_cast<P::ParallelDeclContext*>(c)) {
      ParallelDecl p;
      p.loc = tokenLoc(file_, c->getStart());
      for (auto* item : x->parallelItem()) {
        if (auto* s = dynamic_cast<P::MeshDeclContext*>(item)) {
          if (p.has_mesh)
            diags_.error(tokenLoc(file_, s->getStart()), "a second `mesh` line",
                         "list every axis on one line: `mesh dp = 2, tp = 2`");
          p.has_mesh = true;
          p.mesh_loc = tokenLoc(file_, s->getStart());
          for (auto* a : s->meshAxis()) p.mesh.push_back(MeshAxis{ident(a->ident()), expr(a->expr())});
        } else if (auto* s = dynamic_cast<P::SplitRuleContext*>(item)) {
          std::vector<P::IdentContext*> ids = s->ident();
          SplitRule r;
          r.loc = tokenLoc(file_, s->getStart());
          r.dim = ids.size() > 0 ? ident(ids[0]) : Ident{"<error>", r.loc};
          r.axis = ids.size() > 1 ? ident(ids[1]) : Ident{"<error>", r.loc};
          p.splits.push_back(std::move(r));
        } else if (auto* s = dynamic_cast<P::ParallelSettingContext*>(item)) {
          p.settings.push_back(Setting{ident(s->ident()), expr(s->expr())});
        }
      }
      m.parallel.push_back(std::move(p));
    }
  }

  const diag::SourceManager& src_;
  int file_;
  diag::Diagnostics& diags_;
  int depth_ = 0;
  bool depth_reported_ = false;
};

// Steps 1–3, shared by files and single expressions. Returns false when the
// input was rejected before parsing.
template <typename Fn>
bool withParser(const diag::SourceManager& src, int file, diag::Diagnostics& diags, Fn&& fn) {
  const std::string& text = src.text(file);
  if (text.size() > kMaxFileBytes) {
    diags.error(Loc{file, 1, 1, 1}, "file is larger than 4 MiB",
                "a spec is a short description; put data in data files");
    return false;
  }
  size_t bad = 0;
  if (!validUtf8(text, bad)) {
    diags.error(byteLoc(src, file, bad), "invalid UTF-8 byte in source",
                "save the file as UTF-8");
    return false;
  }
  try {
    antlr4::ANTLRInputStream input(text);
    dtl_gen::DtlLexer lexer(&input);
    lexer.removeErrorListeners();
    antlr4::CommonTokenStream tokens(&lexer);
    tokens.fill();
    std::vector<size_t> lexical_errors;
    if (!scanTokens(file, tokens, diags, lexical_errors)) return false;
    dtl_gen::DtlParser parser(&tokens);
    // SLL prediction only: where SLL meets a conflict, ANTLR's default (LL)
    // retries with the full context, reading ahead to the end of what could
    // follow. `repeat(n) BODY` takes a whole expression, so in `repeat(2)
    // L(d)+1+1+…` every `+` was such a retry over the rest of the chain:
    // quadratic, 19 s at 1000 terms (a fuzz find). This grammar needs no
    // full context: the whole test suite, the golden diagnostics among it,
    // passes unchanged under SLL.
    parser.getInterpreter<antlr4::atn::ParserATNSimulator>()->setPredictionMode(antlr4::atn::PredictionMode::SLL);
    parser.setErrorHandler(std::make_shared<Recovery>());
    parser.removeErrorListeners();
    ErrorListener listener(file, diags, std::move(lexical_errors));
    parser.addErrorListener(&listener);
    fn(parser);
    return true;
  } catch (const std::exception& e) {
    // ANTLR is third-party code: its exceptions stop at this boundary.
    diags.error(Loc{file, 1, 1, 1}, std::string("the parser failed: ") + e.what());
    return false;
  }
}

}  // namespace

Module parseFile(const diag::SourceManager& src, int file, diag::Diagnostics& diags) {
  Module m;
  m.file = file;
  withParser(src, file, diags, [&](P& parser) {
    P::FileContext* tree = parser.file();
    Builder b(src, file, diags);
    m = b.build(tree);
  });
  return m;
}

ExprPtr parseExpression(const diag::SourceManager& src, int file, diag::Diagnostics& diags) {
  ExprPtr out;
  int before = diags.errorCount();
  withParser(src, file, diags, [&](P& parser) {
    P::ExprOnlyContext* tree = parser.exprOnly();
    Builder b(src, file, diags);
    out = b.expr(tree->expr());
  });
  if (diags.errorCount() != before) return nullptr;
  return out;
}

std::string exprText(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Number: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", e.number);
      return buf;
    }
    case Expr::Kind::Quantity: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", e.number);
      return std::string(buf) + " " + e.text;
    }
    case Expr::Kind::String: return "\"" + e.text + "\"";
    case Expr::Kind::Bool: return e.number != 0 ? "true" : "false";
    case Expr::Kind::Name: return e.text;
    case Expr::Kind::Member: return (e.kids.empty() ? "" : exprText(*e.kids[0])) + "." + e.text;
    case Expr::Kind::Call: {
      std::string s = e.kids.empty() ? "" : exprText(*e.kids[0]);
      s += "(";
      for (size_t i = 1; i < e.kids.size(); ++i) {
        if (i > 1) s += ", ";
        if (!e.arg_names[i - 1].empty()) s += e.arg_names[i - 1] + " = ";
        s += exprText(*e.kids[i]);
      }
      return s + ")";
    }
    case Expr::Kind::Unary: return e.text + exprText(*e.kids[0]);
    case Expr::Kind::Binary:
    case Expr::Kind::Range:
    case Expr::Kind::Arrow: {
      std::string op = e.kind == Expr::Kind::Range ? ".." : e.text;
      return exprText(*e.kids[0]) + (op == ".." ? op : " " + op + " ") + exprText(*e.kids[1]);
    }
    case Expr::Kind::Tuple: {
      std::string s = "(";
      for (size_t i = 0; i < e.kids.size(); ++i) s += (i ? ", " : "") + exprText(*e.kids[i]);
      return s + (e.kids.size() == 1 ? ",)" : ")");
    }
    case Expr::Kind::Repeat: return "repeat(" + exprText(*e.kids[0]) + ") " + exprText(*e.kids[1]);
    case Expr::Kind::Error: return "<error>";
  }
  return "";
}

}  // namespace dtl::syntax
