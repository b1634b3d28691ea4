#ifndef ZBPP_SCHEDULER_EXPORT_SVG_H_
#define ZBPP_SCHEDULER_EXPORT_SVG_H_

#include <string>
#include <string_view>

#include "scheduler/schedule.h"
#include "scheduler/simulator.h"

namespace zbpp::sched {

/// A self-contained SVG Gantt chart of a simulated schedule: one row per
/// stage, time to the right, one box per action labelled with its
/// microbatch and coloured by pass as in the paper's figures (the
/// vocabulary passes S and T in orange and purple), idle time
/// left blank; a title with the schedule name, makespan and bubble rate.
/// When the schedule holds reductions (PassKind::kReduce), each stage's
/// row gets a lower communication row under it where they are drawn, grey,
/// since they overlap the passes.
std::string ToSvg(const Schedule& schedule, const SimulationResult& result);

/// `text` made safe inside XML or HTML, as text or as a quoted attribute
/// value: PrintableText's (common/text_table.h: line breaks and tabs become
/// spaces, every other control byte "\xHH", so no ESC sequence reaches a
/// terminal showing the page's source and no byte XML 1.0 forbids remains),
/// then & < > " ' as character references. Other bytes, UTF-8 included, are
/// kept. ToSvg's labels and the coordinator's pages go through it. Pure.
std::string EscapeMarkup(std::string_view text);

}  // namespace zbpp::sched

#endif  // ZBPP_SCHEDULER_EXPORT_SVG_H_
