// Line-at-a-time forwarding of the ranks' output.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace loom::run {

/// One of loomrun's own outputs (stdout or stderr). Every write() call goes out whole, so
/// text written in one call never mixes with other text from loomrun. Once the reader has gone
/// (EPIPE), further output is dropped.
class Sink {
 public:
  explicit Sink(int fd) : fd_(fd) {}
  void write(std::string_view text);

 private:
  int fd_;
  bool broken_ = false;
};

/// Splits one rank stream into lines and writes each whole line, with `prefix`, to a sink.
class LineSplitter {
 public:
  /// A line longer than this is written in pieces, each prefixed as a line of its own.
  static constexpr std::size_t kMaxLine = 64 * 1024;

  /// With `terminate_partial`, a final line without a newline gets one (prefixed output).
  LineSplitter(std::string prefix, Sink* sink, bool terminate_partial)
      : prefix_(std::move(prefix)), sink_(sink), terminate_partial_(terminate_partial) {}

  /// Buffers `data` and writes every complete line in it.
  void feed(std::string_view data);
  /// Writes the unfinished last line, if any (at end of stream).
  void finish();

 private:
  void emit(std::string_view text, bool add_newline);

  std::string prefix_;
  Sink* sink_;
  bool terminate_partial_;
  std::string pending_;  // the unfinished last line
  std::string scratch_;  // reused output buffer
};

/// Writes "loomrun: <message>\n" to stderr as one line.
void report(std::string_view message);

}  // namespace loom::run
