# kiln's Ruby harness, harness mode (see harness.rb and ../README.md). Read only when
# asserts.json mentions "arguments"; KilnHarness.run returns only when it is not of the shape
# {"arguments": [[arg, ...], ...]} (plain mode then: ruby goes on with solution.rb).
require "json"

module KilnHarness
  # Loaded by its absolute path, so that `__FILE__ == $0` is false as for any library; backtraces
  # that pass through name it as `ruby solution.rb` does.
  SOLUTION = File.expand_path("solution.rb")
  NAME = "solution.rb"
  MAIN_FRAME = /\A#{Regexp.escape(NAME)}:\d+:in `<top \(required\)>'\z/.freeze
  UTF8 = Encoding::UTF_8
  NOT_A_CLASS = Module.new # stands for Set when the solution did not load it

  module_function

  def run(data)
    calls = parse(data) or return
    capture
    target = load_solution # ends the process (as the plain program would) when it cannot
    report(target, calls) unless target.nil? # nil: plain mode after all
    nil
  end

  # The arguments lists, or nil when data is not {"arguments": [[arg, ...], ...]} in UTF-8 JSON.
  def parse(data)
    text = data.dup.force_encoding(UTF8)
    return nil unless text.valid_encoding?

    text = text.delete_prefix("\uFEFF")
    spec = JSON.parse(text, max_nesting: 10_000, allow_nan: false, create_additions: false)
    return nil unless spec.is_a?(Hash) && spec.key?("arguments")

    calls = spec["arguments"]
    return nil unless calls.is_a?(Array) && calls.all?(Array)

    calls
  rescue JSON::ParserError, JSON::NestingError, SystemStackError, EncodingError
    nil
  end

  # ---- stdout capture: for the whole harness mode fd 1 is an anonymous file, so puts, print,
  # STDOUT.write and child processes are all captured per call; the report goes to a private
  # duplicate of the real stdout. While the solution loads, that file is kiln's HELD_STDOUT
  # (kiln/native/kiln.h) and STDOUT writes through to it: a load ended abruptly (exit!, a kill,
  # the timeout, an OOM) leaves what it printed there, and kiln-init passes it on as stdout.
  # Once loaded, the file is unlinked (unhold) and stays the capture.
  HELD = "/sandbox/check/.kiln-held-stdout"

  def capture
    STDOUT.flush
    @real = STDOUT.dup
    @real.binmode
    @cap = open_capture
    STDOUT.reopen(@cap)
    STDOUT.binmode
    @sync = STDOUT.sync
    STDOUT.sync = true
  end

  # Loading is over: the file is the harness's alone, STDOUT buffers as it did.
  def unhold
    return unless @held

    @held = false
    File.unlink(HELD)
  rescue SystemCallError
    nil
  ensure
    STDOUT.sync = @sync
  end

  def open_capture
    begin
      file = File.open(HELD, File::RDWR | File::CREAT | File::EXCL | File::NOFOLLOW | File::BINARY, 0o600)
      @held = true
      return file
    rescue SystemCallError, ArgumentError, NameError
      nil # not in kiln's sandbox: an anonymous file, as before
    end
    dir = ENV.fetch("TMPDIR", "/tmp")
    File.open(dir, File::RDWR | File::TMPFILE | File::BINARY, 0o600)
  rescue SystemCallError, ArgumentError, NameError # no O_TMPFILE here: a file unlinked at once
    path = File.join(dir, "kiln-stdout-#{Process.pid}-#{rand(1 << 30)}")
    file = File.open(path, File::RDWR | File::CREAT | File::EXCL | File::BINARY, 0o600)
    File.unlink(path)
    file
  end

  # The bytes printed since the last take.
  def take
    [$stdout, STDOUT].uniq.each do |io|
      io.flush
    rescue StandardError
      nil
    end
    size = @cap.size
    return +"" if size.zero?

    out = @cap.pread(size, 0)
    @cap.truncate(0)
    @cap.sysseek(0) # fd 1 shares this file offset
    out
  end

  # Back to plain behaviour: the captured bytes go out as they are, fd 1 is restored.
  def release
    unhold
    out = take
    STDOUT.reopen(@real)
    @real.close
    @cap.close
    STDOUT.write(out) unless out.empty?
    STDOUT.flush
  end

  # ---- loading

  def load_solution
    begin
      load(SOLUTION)
    rescue SyntaxError => e
      # solution.rb itself does not compile, so nothing ran yet: ruby compiles it as its main
      # script and reports the error exactly as a bare run does. (A SyntaxError raised while it
      # ran, from a require or an eval, is an error while loading.)
      release
      return nil if e.backtrace.none? { |line| line.start_with?("#{SOLUTION}:") }

      die(e)
    rescue SystemExit
      release
      raise
    rescue Exception => e # rubocop:disable Lint/RescueException
      release
      die(e)
    end
    main = TOPLEVEL_BINDING.receiver
    return main.method(:solution) if main.respond_to?(:solution, true)
    if Object.const_defined?(:Solution, false)
      holder = Object.const_get(:Solution, false)
      return holder.method(:solution) if holder.respond_to?(:solution)
    end
    # Loading was the whole run: end as the script would have ended (at_exit handlers, status 0).
    release
    exit
  end

  # Uncaught as in a bare run: the backtrace without this harness's frames, the solution's top
  # level named <main>.
  def die(error)
    message = error.message
    error.define_singleton_method(:message) { message } # computed while the frames were whole
    trace = error.backtrace&.map { |line| line.start_with?("#{SOLUTION}:") ? NAME + line.delete_prefix(SOLUTION) : line }
    if trace
      last = trace.rindex { |line| MAIN_FRAME.match?(line) }
      if last
        trace = trace[0..last]
        trace[last] = trace[last].sub("<top (required)>", "<main>")
        error.set_backtrace(trace)
      end
    end
    raise error
  end

  # ---- calls

  def report(target, calls)
    unhold
    items = []
    loaded = take
    items << %({"type":"output","value":#{text(loaded)}}) unless loaded.empty?
    clock = Process::CLOCK_MONOTONIC
    calls.each do |args|
      start = Process.clock_gettime(clock)
      begin
        value = target.call(*args)
        elapsed = Process.clock_gettime(clock) - start
        item = %({"type":"result","value":#{value_json(value)})
      rescue Exception => e # rubocop:disable Lint/RescueException -- exit and signals too: one call cannot end the run
        elapsed = Process.clock_gettime(clock) - start
        item = %({"type":"error","value":#{text(message(e))})
      end
      value = nil
      items << "#{item},\"time\":\"#{format('%.7f', elapsed)}\",\"output\":#{text(take)}}"
    end
    @real.write("[#{items.join(',')}]\n")
    @real.flush
    $stderr.flush
    exit!(0) # nothing the solution left behind (threads, at_exit) may print or change the status
  end

  def message(error)
    name = error.class.name || error.class.inspect
    text = begin
      error.message.to_s
    rescue Exception # rubocop:disable Lint/RescueException
      "<exception message failed>"
    end
    text.empty? || text == name ? name : "#{name}: #{text}"
  end

  # ---- values

  def text(string)
    JSON.generate(utf8(string))
  end

  def utf8(string)
    s = string.to_s
    return s if s.encoding == UTF8 && s.valid_encoding?

    s = s.dup.force_encoding(UTF8)
    s.valid_encoding? ? s : s.scrub("\uFFFD")
  end

  # The JSON text of a returned value; never raises.
  def value_json(value)
    JSON.generate(plain(value), max_nesting: false, allow_nan: false)
  rescue Exception # rubocop:disable Lint/RescueException -- cycles (SystemStackError), odd objects
    begin
      text(value.inspect)
    rescue Exception # rubocop:disable Lint/RescueException
      '"<unserialisable value>"'
    end
  end

  # value as plain JSON data: sets, structs and finite ranges as their natural JSON shape,
  # non-finite floats as null, hash keys as strings, other objects as their to_s (or inspect).
  def plain(value)
    case value
    when nil, true, false, Integer then value
    when Float then value.finite? ? value : nil
    when String then utf8(value)
    when Symbol then utf8(value.to_s)
    when Array then value.map { |x| plain(x) }
    when Hash
      value.each_with_object({}) { |(k, x), h| h[key(k)] = plain(x) }
    when (defined?(::Set) ? ::Set : NOT_A_CLASS)
      list = value.to_a
      list = list.sort rescue list # rubocop:disable Style/RescueModifier
      list.map { |x| plain(x) }
    when Struct then plain(value.to_h)
    when Range
      value.end && value.begin.is_a?(Integer) ? plain(value.to_a) : utf8(value.to_s)
    when Rational then value.denominator == 1 ? value.numerator : plain(value.to_f)
    else
      if value.respond_to?(:to_h) && defined?(OpenStruct) && value.is_a?(OpenStruct)
        plain(value.to_h)
      elsif value.method(:to_s).owner == Kernel
        utf8(value.inspect)
      else
        utf8(value.to_s)
      end
    end
  end

  def key(k)
    k.is_a?(String) ? utf8(k) : utf8(k.to_s)
  end
end
