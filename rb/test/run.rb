# frozen_string_literal: true

# Runs every rb/test/test_*.rb in its own process, KURA_TEST_JOBS (3) at a
# time: the suites mostly wait on servers, sleeps and child processes, so
# they overlap well on 2 cores. Prints each file's summary and time; exits
# non-zero if any failed.
require 'open3'

files = Dir[File.join(__dir__, 'test_*.rb')].sort
jobs = Integer(ENV.fetch('KURA_TEST_JOBS', 3))
queue = Queue.new
files.each { |f| queue << f }
results = {}
lock = Mutex.new
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
Array.new(jobs) do
  Thread.new do
    while (f = (queue.pop(true) rescue nil)) # rubocop:disable Style/RescueModifier
      s = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      out, st = Open3.capture2e('ruby', '-I', File.join(__dir__, '..', 'lib'), '-I', __dir__, f)
      lock.synchronize { results[f] = [st.success?, out, Process.clock_gettime(Process::CLOCK_MONOTONIC) - s] }
    end
  end
end.each(&:join)
failed = false
results.sort.each do |f, (ok, out, secs)|
  summary = out.lines.grep(/runs, .* assertions/).last.to_s.strip
  puts format('%-28s %5.1f s  %s', File.basename(f), secs, summary)
  next if ok

  failed = true
  puts out
end
puts format('rb: %d files in %.1f s', files.length, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0)
exit(failed ? 1 : 0)
