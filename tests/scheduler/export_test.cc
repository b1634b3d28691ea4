#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/export_svg.h"
#include "scheduler/export_trace.h"
#include "scheduler/problem.h"
#include "scheduler/schedule.h"
#include "scheduler/simulator.h"
#include "tests/scheduler/schedule_builder.h"

namespace zbpp::sched {
namespace {

using ::testing::HasSubstr;

// p=2, m=2: microbatch 0 with split B and W (never adjacent, which would
// merge them: MergesWithNext), microbatch 1 fused, so that every pass kind
// appears.
Schedule Mixed() {
  return testing::ScheduleFromRows(
      "mixed", 2, 1, 2, Placement::kLoop,
      {{"0F0", "0F1", "0I0", "0B1", "0W0"}, {"1F0", "1I0", "1F1", "1B1", "1W0"}});
}

SimulationResult SimulateMixed(const Schedule& schedule) {
  // F=1, B=2, W=3 s, one hop 0.5 s.
  const Problem problem =
      Problem::Uniform(2, 1, 2, VirtualStageCost{1, 2, 3, 1, 0.5}, 0.5);
  absl::StatusOr<SimulationResult> result = Simulate(problem, schedule);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : SimulationResult{};
}

// The "pass" argument the trace should carry for each kind.
const std::map<PassKind, std::string> kPassName = {
    {PassKind::kF, "F"}, {PassKind::kB, "B"}, {PassKind::kW, "W"},
    {PassKind::kBW, "BW"}};

TEST(ExportChromeTrace, OneCompleteEventPerActionWithMicrosecondTimes) {
  const Schedule schedule = Mixed();
  const SimulationResult result = SimulateMixed(schedule);
  const nlohmann::json trace = nlohmann::json::parse(ToChromeTrace(schedule, result));
  ASSERT_TRUE(trace.is_object());
  EXPECT_EQ(trace.at("displayTimeUnit"), "ms");
  std::map<int, std::vector<nlohmann::json>> by_stage;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    if (event.at("ph") == "X") by_stage[event.at("tid").get<int>()].push_back(event);
  }
  ASSERT_EQ(by_stage.size(), 2u);
  std::map<std::string, std::set<std::string>> colours_by_pass;
  for (int w = 0; w < 2; ++w) {
    ASSERT_EQ(by_stage[w].size(), schedule.actions[w].size());
    for (size_t i = 0; i < schedule.actions[w].size(); ++i) {
      const Action& a = schedule.actions[w][i];
      const ActionTiming& t = result.timings[w][i];
      const nlohmann::json& e = by_stage[w][i];
      EXPECT_EQ(e.at("name"), ActionToString(a));
      EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), t.start_seconds * 1e6);
      EXPECT_DOUBLE_EQ(e.at("dur").get<double>(),
                       (t.end_seconds - t.start_seconds) * 1e6);
      EXPECT_EQ(e.at("args").at("virtual_stage"), a.virtual_stage.value());
      EXPECT_EQ(e.at("args").at("microbatch"), a.microbatch);
      EXPECT_EQ(e.at("args").at("pass"), kPassName.at(a.kind));
      colours_by_pass[kPassName.at(a.kind)].insert(e.at("cname").get<std::string>());
    }
  }
  // The simulator's times for a hand-checked action: 1F0 starts after the
  // 0.5 s hop, at 1.5 s, and runs 1 s.
  EXPECT_DOUBLE_EQ(by_stage[1][0].at("ts").get<double>(), 1.5e6);
  EXPECT_DOUBLE_EQ(by_stage[1][0].at("dur").get<double>(), 1e6);
  // One colour per pass kind, four distinct ones.
  std::set<std::string> all;
  for (const auto& [pass, colours] : colours_by_pass) {
    EXPECT_EQ(colours.size(), 1u) << pass;
    all.insert(colours.begin(), colours.end());
  }
  EXPECT_EQ(colours_by_pass.size(), 4u);
  EXPECT_EQ(all.size(), 4u);
}

TEST(ExportChromeTrace, NamesProcessAndStageThreads) {
  const Schedule schedule = Mixed();
  const nlohmann::json trace =
      nlohmann::json::parse(ToChromeTrace(schedule, SimulateMixed(schedule)));
  std::string process;
  std::map<int, std::string> threads;
  for (const nlohmann::json& event : trace.at("traceEvents")) {
    if (event.at("ph") != "M") continue;
    if (event.at("name") == "process_name") {
      process = event.at("args").at("name");
    } else if (event.at("name") == "thread_name") {
      threads[event.at("tid").get<int>()] = event.at("args").at("name");
    }
  }
  EXPECT_EQ(process, "zbpp mixed");
  EXPECT_EQ(threads, (std::map<int, std::string>{{0, "stage 0"},
                                                 {1, "stage 1"}}));
}

TEST(ExportChromeTrace, IsDeterministic) {
  const Schedule schedule = Mixed();
  const SimulationResult result = SimulateMixed(schedule);
  EXPECT_EQ(ToChromeTrace(schedule, result), ToChromeTrace(schedule, result));
}

// Minimal well-formedness: balanced start and end tags with one root, and
// no stray '<' or '&' in text or attributes.
::testing::AssertionResult WellFormedXml(const std::string& xml) {
  std::vector<std::string> open;
  int roots = 0;
  size_t i = 0;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      static const std::regex kEntity("^&(amp|lt|gt|quot|apos|#[0-9]+);");
      if (!std::regex_search(xml.substr(i, 8), kEntity)) {
        return ::testing::AssertionFailure() << "bare '&' at " << i;
      }
    }
    if (xml[i] != '<') {
      ++i;
      continue;
    }
    if (xml.compare(i, 2, "<?") == 0 || xml.compare(i, 4, "<!--") == 0) {
      const size_t end = xml.find(xml[i + 1] == '?' ? "?>" : "-->", i);
      if (end == std::string::npos) return ::testing::AssertionFailure() << "unterminated at " << i;
      i = end + 2;
      continue;
    }
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return ::testing::AssertionFailure() << "unterminated tag at " << i;
    const std::string tag = xml.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) {
      return ::testing::AssertionFailure() << "'<' inside tag at " << i;
    }
    if (tag.front() == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) {
        return ::testing::AssertionFailure()
               << "</" << name << "> closes " << (open.empty() ? "nothing" : open.back());
      }
      open.pop_back();
    } else if (tag.back() != '/') {
      if (open.empty()) ++roots;
      open.push_back(tag.substr(0, tag.find_first_of(" \n\t")));
    } else if (open.empty()) {
      ++roots;
    }
    i = end + 1;
  }
  if (!open.empty()) return ::testing::AssertionFailure() << "<" << open.back() << "> not closed";
  if (roots != 1) return ::testing::AssertionFailure() << roots << " root elements";
  return ::testing::AssertionSuccess();
}

struct SvgBox {
  std::string pass;
  double x, y, width;
};

std::vector<SvgBox> ActionBoxes(const std::string& svg) {
  static const std::regex kRect(
      R"re(<rect class="action (\w+)" x="([0-9.]+)" y="([0-9.]+)" width="([0-9.]+)")re");
  std::vector<SvgBox> boxes;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), kRect);
       it != std::sregex_iterator(); ++it) {
    boxes.push_back({(*it)[1], std::stod((*it)[2]), std::stod((*it)[3]),
                     std::stod((*it)[4])});
  }
  return boxes;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + 1)) {
    ++n;
  }
  return n;
}

TEST(ExportSvg, OneBoxWithTooltipPerActionSizedByDuration) {
  const Schedule schedule = Mixed();
  const SimulationResult result = SimulateMixed(schedule);
  const std::string svg = ToSvg(schedule, result);
  EXPECT_TRUE(WellFormedXml(svg));
  EXPECT_THAT(svg, HasSubstr("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  const std::vector<SvgBox> boxes = ActionBoxes(svg);
  ASSERT_EQ(boxes.size(), 10u);
  EXPECT_EQ(Count(svg, "<title>"), 10u);
  EXPECT_THAT(svg, HasSubstr("<title>1I0: B of virtual stage 1, microbatch 0"));
  // Boxes come in schedule order; widths follow the durations (F=1 s, B=2,
  // W=3, BW=5) and rows differ per stage.
  const double unit = boxes[0].width;  // 0F0
  ASSERT_GT(unit, 0);
  const std::map<std::string, double> seconds = {
      {"F", 1}, {"B", 2}, {"W", 3}, {"BW", 5}};
  for (size_t k = 0; k < boxes.size(); ++k) {
    EXPECT_NEAR(boxes[k].width, unit * seconds.at(boxes[k].pass), 0.05) << k;
  }
  EXPECT_EQ(boxes[0].pass, "F");
  EXPECT_EQ(boxes[3].pass, "BW");
  EXPECT_LT(boxes[0].y, boxes[5].y);
  // 1F0 starts 1.5 s after 0F0.
  EXPECT_NEAR(boxes[5].x - boxes[0].x, 1.5 * unit, 0.05);
  EXPECT_THAT(svg, HasSubstr("mixed: p=2 v=1 m=2"));
}

TEST(ExportSvg, EscapesTheNameAndIsDeterministic) {
  Schedule schedule = Mixed();
  schedule.name = "a<b&\"c\"";
  const SimulationResult result = SimulateMixed(schedule);
  const std::string svg = ToSvg(schedule, result);
  EXPECT_TRUE(WellFormedXml(svg));
  EXPECT_THAT(svg, HasSubstr("a&lt;b&amp;&quot;c&quot;"));
  EXPECT_EQ(svg, ToSvg(schedule, result));
}

// Control bytes in a name (an ESC sequence that would recolour a terminal
// showing the page's source; bytes XML 1.0 forbids) leave as visible text.
TEST(ExportSvg, ControlBytesOfTheNameBecomeVisibleText) {
  Schedule schedule = Mixed();
  schedule.name = "red\x1b[31m\x07" "bell\x7f'";
  const SimulationResult result = SimulateMixed(schedule);
  const std::string svg = ToSvg(schedule, result);
  EXPECT_EQ(svg.find('\x1b'), std::string::npos);
  EXPECT_EQ(svg.find('\x07'), std::string::npos);
  EXPECT_EQ(svg.find('\x7f'), std::string::npos);
  EXPECT_THAT(svg, HasSubstr("red\\x1b[31m\\x07bell\\x7f&#39;"));
  EXPECT_TRUE(WellFormedXml(svg));
  EXPECT_EQ(EscapeMarkup("tab\tline\nutf-8 \xc3\xa9"), "tab line utf-8 \xc3\xa9");
}

// The drawing is at least as wide as its title, which a viewer would cut
// off at the drawing's width: a long name and a short schedule (600 px of
// plot) got 710 px for a title needing at least 1,593.
TEST(ExportSvg, TheDrawingIsAtLeastAsWideAsItsTitle) {
  for (const std::string& name : {std::string("mixed"), std::string(120, 'x') + "&<"}) {
    Schedule schedule = Mixed();
    schedule.name = name;
    const std::string svg = ToSvg(schedule, SimulateMixed(schedule));
    std::smatch width, title;
    ASSERT_TRUE(std::regex_search(svg, width, std::regex("<svg [^>]*width=\"([0-9.]+)\"")));
    ASSERT_TRUE(std::regex_search(
        svg, title, std::regex("<text class=\"title\" x=\"([0-9.]+)\"[^>]*>([^<]*)</text>")));
    // Each character reference is one character; 0.6 em per character of
    // bold 15 px text is a lower bound of what a renderer draws.
    const std::string text = std::regex_replace(title[2].str(), std::regex("&[a-z#0-9]+;"), "&");
    EXPECT_GE(std::stod(width[1]), std::stod(title[1]) + text.size() * 0.6 * 15) << name;
    EXPECT_THAT(text, HasSubstr(name == "mixed" ? "mixed: p=2" : "xxx&&: p=2"));
  }
}

TEST(ExportSvg, WellFormednessCheckRejectsBrokenXml) {
  // Guards the helper itself, so that a passing check above means something.
  EXPECT_FALSE(WellFormedXml("<svg><rect></svg>"));
  EXPECT_FALSE(WellFormedXml("<svg>a & b</svg>"));
  EXPECT_FALSE(WellFormedXml("<svg/><svg/>"));
  EXPECT_TRUE(WellFormedXml("<?xml version=\"1.0\"?><svg><a/><b>x</b></svg>"));
}

}  // namespace
}  // namespace zbpp::sched
