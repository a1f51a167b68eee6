// The grammar of DTL (docs/language-guide.md, shared design language.md).
// The C++ lexer and parser are generated from this file at build time by
// Debian's `antlr4` tool; they are never committed. Only
// compiler/syntax/parse.cc sees the generated types: it turns the parse
// tree into the AST of compiler/syntax/ast.h.
//
// Newlines are not significant: a statement ends where the next one's first
// token cannot continue it. A number followed on the same line by a unit word
// (`25 MiB`, `30 s`, `20 steps`) is one QUANTITY token.
grammar Dtl;

@lexer::members {
  // A unit word ends a QUANTITY only when no identifier character follows and
  // it is not the name of a setting: `3 steps` is a quantity, but neither
  // `3 stepsize` nor `batch = 16 steps = 20` (two settings on one line) is.
  static bool unitEndsHere(antlr4::CharStream* in) {
    size_t c = in->LA(1);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_') return false;
    for (ssize_t k = 1;; ++k) {
      size_t d = in->LA(k);
      if (d == ' ' || d == '\t') continue;
      return d != '=' || in->LA(k + 1) == '=';
    }
  }
}

file : decl* EOF ;
exprOnly : expr EOF ;   // `--set key=EXPR`

decl
  : 'import' STRING                                        # importDecl
  | 'layer' ident '(' layerArgs? ')' '{' bodyItem* '}'     # layerDecl
  | 'model' ident '{' bodyItem* '}'                        # modelDecl
  | 'data' '{' dataItem* '}'                               # dataDecl
  | 'train' '{' trainItem* '}'                             # trainDecl
  | 'parallel' '{' parallelItem* '}'                       # parallelDecl
  | ';'                                                    # emptyDecl
  ;

layerArgs : layerArg (',' layerArg)* ','? ;
layerArg  : ident ':' argType ('=' expr)? ;
argType   : 'dim' | ident ;

// The body of a layer or a model; sema says which items each may hold.
bodyItem
  : 'dim' dimDef (',' dimDef)*                              # dimDecl
  | 'param' ident ':' tensorType 'init' initExpr=expr ('if' cond=expr)?   # paramDecl
  | 'input' ident ':' tensorType                            # inputDecl
  | 'metric' ident '=' expr                                 # metricDecl
  | 'forward' '(' names? ')' '=' expr                       # forwardExpr
  | 'forward' '(' names? ')' '{' stmt* '}'                  # forwardBlock
  | ident '=' expr                                          # binding
  | ';'                                                     # emptyItem
  ;

dimDef     : ident '=' expr ;
tensorType : ident? '[' names? ']' ;
names      : ident (',' ident)* ','? ;

stmt
  : 'let' ident '=' expr      # letStmt
  | 'return' expr             # returnStmt
  | ';'                       # emptyStmt
  ;

dataItem
  : ('train' | ident) '{' splitItem* '}'    # dataSplit
  | ident '=' expr                          # dataSetting
  | ';'                                     # emptyData
  ;

splitItem
  : ident '=' expr       # fieldBinding
  | expr                 # fieldSource    // a source that yields several fields: text(…), synthetic(…)
  | ';'                  # emptySplit
  ;

trainItem
  : ident '=' expr                                  # trainSetting
  | ident target=expr? 'every' period=expr ('keep' count=expr)?   # trainEvery   // log/eval/checkpoint
  | ';'                                             # emptyTrain
  ;

parallelItem
  : 'mesh' meshAxis (',' meshAxis)*     # meshDecl
  | 'split' ident 'over' ident          # splitRule
  | ident '=' expr                      # parallelSetting
  | ';'                                 # emptyParallel
  ;

meshAxis : ident '=' expr ;

expr
  : primary                                                   # primaryExpr
  | expr '.' ident                                            # memberExpr
  | expr '(' args? ')'                                        # callExpr
  | op=('-' | '+' | '!') expr                                 # unaryExpr
  | expr op=('@' | '*' | '/') expr                            # mulExpr
  | expr op=('+' | '-') expr                                  # addExpr
  | expr '..' expr                                            # rangeExpr
  | expr op=('==' | '!=' | '<' | '<=' | '>' | '>=') expr      # compareExpr
  | expr '&&' expr                                            # andExpr
  | expr '||' expr                                            # orExpr
  | <assoc=right> expr '->' expr                              # arrowExpr
  ;

primary
  : NUMBER                                  # numberLit
  | QUANTITY                                # quantityLit
  | STRING                                  # stringLit
  | ('true' | 'false')                      # boolLit
  | ident                                   # nameRef
  | 'repeat' '(' expr ')' expr              # repeatExpr
  | '(' expr ')'                            # parenExpr
  | '(' (expr (',' expr)+ ','? | expr ',' | ) ')'   # tupleExpr
  ;

args : arg (',' arg)* ','? ;
arg  : (ident '=')? expr ;

// Words that are keywords in one place but ordinary names elsewhere
// (`mean(x, over = d)`, `dim` as an argument type).
ident : ID | 'over' | 'every' | 'keep' ;

QUANTITY
  : DIGITS ('.' DIGITS)? EXPONENT? [ \t]* UNIT {unitEndsHere(_input)}?
  ;
NUMBER : DIGITS ('.' DIGITS)? EXPONENT? ;
STRING : '"' (~["\\\r\n] | '\\' .)* '"' ;
ID     : [A-Za-z_] [A-Za-z0-9_]* | '1f1b' ;

fragment DIGITS   : [0-9]+ ;
fragment EXPONENT : [eE] [+-]? DIGITS ;
fragment UNIT
  : 'B' | 'KiB' | 'MiB' | 'GiB' | 'TiB' | 'KB' | 'MB' | 'GB' | 'TB'
  | 'ms' | 's' | 'min' | 'h'
  | 'step' | 'steps' | 'epoch' | 'epochs'
  ;

COMMENT : '#' ~[\r\n]* -> skip ;
WS      : [ \t\r\n]+ -> skip ;
// Anything else is reported by parse.cc's token scan and hidden from the parser.
UNKNOWN : . -> channel(HIDDEN) ;
