// What `abox mcp install` tells each agent about the sandbox: when and how to use the abox MCP
// server's tools. Claude Code gets it as a skill, Codex as a section of AGENTS.md, Cursor as a
// rule; the text is the same.
#pragma once

#include <string>

namespace abox::cli {

// Every file or section abox writes carries this phrase, so that abox recognizes its own files
// (and never deletes or overwrites one a person wrote).
inline constexpr char kWrittenByAbox[] = "Written by `abox mcp install";

// The markers around abox's section of AGENTS.md, each alone on its line.
inline constexpr char kSectionBegin[] = "<!-- abox:begin -->";
inline constexpr char kSectionEnd[] = "<!-- abox:end -->";

// .claude/skills/abox/SKILL.md: front matter (name, description) and the guidance.
[[nodiscard]] std::string ClaudeSkill();

// The AGENTS.md section, from kSectionBegin to kSectionEnd, ending with a newline.
[[nodiscard]] std::string AgentsSection();

// .cursor/rules/abox.mdc: front matter (description, alwaysApply) and the guidance.
[[nodiscard]] std::string CursorRule();

}  // namespace abox::cli
