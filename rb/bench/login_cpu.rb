# frozen_string_literal: true

# The field report's cold login (5,000 records of ~300 B, 3 memcached
# servers) through the harness's delay proxy, kura's CPU time beside its wall
# time, two versions of the gem side by side: child processes alternate the
# code "before" (a lib directory, e.g. main's) and "after" (this checkout),
# each running R rounds of fetch_multi with leases and without (interleaved,
# order rotating); then per-key writes (5,000 round trips) for the ratio.
#
#   git archive <commit> rb/lib | tar -x -C /tmp/before
#   cd rb && KURA_RB_PREBUILT=1 BEFORE_LIB=/tmp/before/rb/lib ruby -Ilib -Itest bench/login_cpu.rb
#
# ALT (alternations, 3), R (rounds per child, 3), PERKEY (per-key runs, 1),
# KURA_BENCH_RTT_MS (3), KURA_BENCH_RUBYOPT (e.g. --yjit for the children).
require 'json'
require 'time'

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
def cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)

require_relative 'record'

def load_line = File.read('/proc/loadavg').split.first(3).join(' ')

case ENV['KURA_CHILD']
when 'login', 'perkey'
  require 'kura'
  pool = ENV.fetch('POOL').split(',')
  records = Array.new(5000) { |i| record(i) }
  mc = Kura::MemcacheStore.new(pool, timeout: 60)
  leased = Kura::Cache.new(mc, ttl: 3600)
  plain = Kura::Cache.new(mc, ttl: 3600, leases: false)
  out = Hash.new { |h, k| h[k] = [] }
  measure = lambda do |name, &fn|
    GC.start
    c0 = cpu
    t0 = now
    fn.call
    out[name] << [((cpu - c0) * 1000).round(1), ((now - t0) * 1000).round(1)]
  end
  if ENV['KURA_CHILD'] == 'perkey'
    pfx = "pk:#{rand(1 << 30)}"
    measure.call('per-key writes') { records.each_with_index { |r, i| plain.write("#{pfx}:item:#{i}", r, ttl: 3600) } }
  else
    Integer(ENV.fetch('R', 3)).times do |r|
      pfx = "login:#{r}:#{rand(1 << 30)}"
      keys = Array.new(5000) { |i| "#{pfx}:item:#{i}" }
      by = keys.each_with_index.to_h
      sides = [['fetch_multi (leases)', leased, ':a'], ['fetch_multi (leases off)', plain, ':b']]
      sides.rotate(r).each do |name, cache, sfx|
        ks = keys.map { |k| "#{k}#{sfx}" }
        measure.call(name) { cache.fetch_multi(*ks) { |miss| miss.to_h { |k| [k, records[by[k.delete_suffix(sfx)]]] } } }
      end
    end
  end
  puts JSON.generate(out)
  mc.close
  exit
end

require 'helper'
require 'open3'
before = ENV.fetch('BEFORE_LIB')
after = File.expand_path('../lib', __dir__)
pool = Array.new(3) { KuraTest::Servers.memcached[0] }
rtt = ENV.fetch('KURA_BENCH_RTT_MS', '3')
acc = Hash.new { |h, k| h[k] = [] }
loads = [load_line]
Open3.popen2(KuraTest.go_helper, 'proxy', rtt, *pool) do |stdin, stdout, _|
  env = { 'POOL' => JSON.parse(stdout.gets).join(','), 'R' => ENV.fetch('R', '3') }
  opts = ENV.fetch('KURA_BENCH_RUBYOPT', '').split
  child = lambda do |kind, lib, side|
    got, err, = Open3.capture3(env.merge('KURA_CHILD' => kind), 'ruby', *opts, "-I#{lib}", __FILE__)
    warn "#{side} #{kind}: #{err}" unless got.lines.grep(/^\{/).first
    JSON.parse(got.lines.grep(/^\{/).first || '{}').each { |n, xs| acc["#{side}: #{n}"].concat(xs) }
    loads << load_line
  end
  Integer(ENV.fetch('ALT', 3)).times do |i|
    pair = [[before, 'before'], [after, 'after']]
    pair.reverse! if i.odd?
    pair.each { |lib, side| child.call('login', lib, side) }
  end
  Integer(ENV.fetch('PERKEY', 1)).times { child.call('perkey', after, 'after') }
  stdin.close
end

puts "# cold login, 5,000 records, 3 memcached servers, through the delay proxy (#{rtt} ms a round trip)"
puts "# #{Time.now.utc.iso8601}, ruby #{RUBY_VERSION} #{ENV['KURA_BENCH_RUBYOPT']}, load averages #{loads.min_by(&:to_f)} .. #{loads.max_by(&:to_f)}"
med = ->(xs) { xs.sort[xs.length / 2] }
per_key = acc.fetch('after: per-key writes', []).map(&:last)
acc.sort.each do |name, xs|
  c = xs.map(&:first).sort
  w = xs.map(&:last).sort
  line = format('%-36s CPU median %7.1f ms (%.1f-%.1f)  wall median %8.1f ms (%.1f-%.1f)  n=%d',
                name, med.call(c), c.first, c.last, med.call(w), w.first, w.last, xs.length)
  line += format('  per-key / this: %.1fx by medians (%.1fx by minimums)', med.call(per_key) / med.call(w), per_key.min / w.first) unless per_key.empty? || name.include?('per-key')
  puts line
end
