# kiln's Ruby harness for a prestarted slot (Makefile `prestart`, and `template`: see
# ../README.md). Started ahead of the request, from check/ as `ruby prestart.rb`, it loads what
# the harness mode loads, waits for kiln's go byte on descriptor 3 (the request's files are then
# in place), and from there on does exactly what the test command (`ruby -r./harness.rb
# solution.rb`) does: harness.rb, then solution.rb as the main script.
#
# A main script cannot be given to a ruby already running, so solution.rb is compiled as ruby
# compiles its main script (RubyVM::InstructionSequence.compile_file: `<main>`, __FILE__ ==
# $0 == "solution.rb") and evaluated at the top level, with DATA when it has an __END__; a
# syntax error and an uncaught exception are reported as ruby reports them for a main script
# (this file's frames cut from the backtrace). Top-level locals here are this file's own.
require "json"
require_relative "harness_calls"

if ARGV == ["--template"]
  # kiln forks each prestarted task from here: serve returns 1 in every forked task, in its slot,
  # with descriptor 3 its go pipe; 0 once kiln is gone (kiln/native/template_ruby.c).
  require "fiddle"
  library = Fiddle::Handle.new("/proc/self/fd/4")
  IO.for_fd(4).close
  fork_alike = Fiddle::Function.new(library["kiln_template_fork_alike"], [], Fiddle::TYPE_INT, need_gvl: true)
  serve = Fiddle::Function.new(library["kiln_template_serve"], [Fiddle::TYPE_INT], Fiddle::TYPE_INT, need_gvl: true)
  $stdout.flush
  $stderr.flush
  # A fork of ruby works only where kiln's library found this ruby's fork steps: one child made
  # as a task is, that uses a thread, a sleep and a signal, or no task is forked (kiln logs this
  # and spawns the prestart command instead).
  child = fork_alike.call
  if child.zero?
    Signal.trap("USR1") { exit!(Thread.new { sleep 0.001; 42 }.value) }
    Process.kill("USR1", Process.pid)
    sleep 1
    exit!(1)
  end
  # said on descriptor 3, the zygote's socket, as kiln/zygote/template.py's UNAVAILABLE: not retried
  unavailable = lambda do |why|
    why = "kiln: cannot fork tasks from this runtime: #{why}"
    IO.for_fd(3, autoclose: false).syswrite(why)
    abort why
  end
  unavailable.call("this ruby's fork steps were not found") if child.negative?
  Process.wait(child)
  unavailable.call("a fork of this ruby did not work (#{$?.inspect})") unless $?.exitstatus == 42
  forked = serve.call(3)
  exit if forked.zero?
  unavailable.call("this ruby's fork steps were not found") if forked.negative?
  library = fork_alike = serve = child = forked = unavailable = nil
end

go = IO.for_fd(3)
exit unless go.read(1) # the slot was closed before a request came
go.close
go = nil
Dir.chdir(__dir__)
ARGV.clear
$0 = "solution.rb" # also the process title, as ruby's own $0 is not

require_relative "harness" # harness mode ends the process here; plain mode returns

source = begin
  File.binread("solution.rb")
rescue SystemCallError => e
  abort "ruby: #{e.message.sub(/ @ \w+ - /, ' -- ')} (LoadError)"
end
main = begin
  RubyVM::InstructionSequence.compile_file("solution.rb")
rescue SyntaxError => e
  $stderr.write(e.message.end_with?("\n") ? e.message : "#{e.message}\n") # as ruby prints it for its main script
  exit 1
end
if source.include?("__END__")
  # DATA: solution.rb, open after its __END__ line, as ruby leaves it for a main script. The
  # lexer tells where that line is (one in a string or heredoc does not count).
  require "ripper"
  lexer = Class.new(Ripper) do
    attr_reader :end_line

    def on___end__(_token)
      @end_line = lineno
    end
  end.new(source.dup.force_encoding(Encoding::UTF_8), "solution.rb") # ruby's source encoding
  lexer.parse
  if lexer.end_line
    data = File.open("solution.rb")
    data.set_encoding(lexer.encoding)
    data.pos = source.lines[0, lexer.end_line].sum(&:bytesize)
    data.lineno = lexer.end_line
    Object.const_set(:DATA, data)
  end
  lexer = data = nil
end
source = nil

begin
  main.eval
rescue Exception => e # rubocop:disable Lint/RescueException -- uncaught, as ruby reports it
  trace = e.backtrace
  last = trace&.rindex { |line| line.match?(/\Asolution\.rb:\d+:in `<main>'\z/) }
  e.set_backtrace(trace[0..last]) if last
  raise e
end
