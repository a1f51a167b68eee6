// Diagnostics: the rendered format, the cap, de-duplication, hints.
#include <gtest/gtest.h>

#include "compiler/diag/diagnostics.h"

namespace dtl::diag {
namespace {

TEST(Diagnostics, RendersLineCaretRangeAndHint) {
  SourceManager src;
  int f = src.add("spec.dtl", "model M {\n  fc1 = Lineer(pixels, hidden)\n}\n");
  Diagnostics d(src);
  d.error(Loc{f, 2, 9, 6}, "unknown name `Lineer`", "did you mean `Linear`?");
  EXPECT_EQ(d.render(),
            "spec.dtl:2:9: error: unknown name `Lineer`\n"
            "    fc1 = Lineer(pixels, hidden)\n"
            "          ^~~~~~\n"
            "hint: did you mean `Linear`?\n"
            "1 error generated.\n");
  EXPECT_EQ(d.renderJson(),
            "[{\"severity\":\"error\",\"file\":\"spec.dtl\",\"line\":2,\"column\":9,"
            "\"message\":\"unknown name `Lineer`\",\"hint\":\"did you mean `Linear`?\"}]");
}

TEST(Diagnostics, CapsAtTwentyAndSaysHowManyMore) {
  SourceManager src;
  int f = src.add("s.dtl", "x\n");
  Diagnostics d(src);
  for (int i = 0; i < 25; ++i) d.error(Loc{f, 1, 1, 1}, "error " + std::to_string(i));
  EXPECT_EQ(d.errorCount(), 20);
  std::string r = d.render();
  EXPECT_NE(r.find("note: 5 more errors not shown (limit 20)\n25 errors generated.\n"), std::string::npos) << r;
}

TEST(Diagnostics, SameMistakeAtSamePlaceIsReportedOnce) {
  SourceManager src;
  int f = src.add("s.dtl", "x\n");
  Diagnostics d(src);
  d.error(Loc{f, 1, 1, 1}, "m");
  d.error(Loc{f, 1, 1, 1}, "m");
  EXPECT_EQ(d.errorCount(), 1);
}

// A warning renders like an error, never counts as one, and the summary
// counts both (what `dtlc check` accepts but `plan` refuses).
TEST(Diagnostics, WarningsAreNotErrorsAndAreCounted) {
  SourceManager src;
  int f = src.add("s.dtl", "  zero = 1\n");
  Diagnostics d(src);
  d.warning(Loc{f, 1, 3, 4}, "`zero = 1` is not built yet", "remove it");
  EXPECT_FALSE(d.hasErrors());
  EXPECT_EQ(d.warningCount(), 1);
  EXPECT_EQ(d.render(),
            "s.dtl:1:3: warning: `zero = 1` is not built yet\n"
            "    zero = 1\n"
            "    ^~~~\n"
            "hint: remove it\n"
            "1 warning generated.\n");
  EXPECT_EQ(d.renderJson(),
            "[{\"severity\":\"warning\",\"file\":\"s.dtl\",\"line\":1,\"column\":3,"
            "\"message\":\"`zero = 1` is not built yet\",\"hint\":\"remove it\"}]");
  d.report(Severity::Warning, Loc{f, 1, 1, 1}, "w2");
  d.report(Severity::Error, Loc{f, 1, 1, 1}, "e");
  EXPECT_TRUE(d.hasErrors());
  std::string r = d.render();
  EXPECT_EQ(r.substr(r.rfind("hint: remove it\n")), "hint: remove it\n"
            "s.dtl:1:1: warning: w2\n    zero = 1\n  ^\n"
            "s.dtl:1:1: error: e\n    zero = 1\n  ^\n"
            "2 warnings and 1 error generated.\n");
}

TEST(Diagnostics, CaretUnderTabsLinesUp) {
  SourceManager src;
  int f = src.add("s.dtl", "\tx = y\n");
  Diagnostics d(src);
  d.error(Loc{f, 1, 6, 1}, "m");
  EXPECT_NE(d.render().find("  \tx = y\n  \t    ^\n"), std::string::npos) << d.render();
}

TEST(Diagnostics, DidYouMeanPicksTheClosestNameOnly) {
  EXPECT_EQ(didYouMean("Lineer", {"Linear", "LayerNorm", "Mlp"}), "did you mean `Linear`?");
  EXPECT_EQ(didYouMean("hiden", {"hidden", "heads"}), "did you mean `hidden`?");
  EXPECT_EQ(didYouMean("zzz", {"Linear", "Mlp"}), "");
  EXPECT_EQ(editDistance("kitten", "sitting"), 3);
}

}  // namespace
}  // namespace dtl::diag
