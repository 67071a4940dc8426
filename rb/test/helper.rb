# frozen_string_literal: true

$LOAD_PATH.unshift File.expand_path('../lib', __dir__)
require 'minitest/autorun'
require 'json'
require 'kura'

module KuraTest
  ROOT = File.expand_path('../..', __dir__)

  def self.testdata(*path)
    File.join(ROOT, 'testdata', *path)
  end

  def self.hex(s)
    [s.gsub(/\s+/, '')].pack('H*')
  end

  GO_ERRORS = {
    'ErrTruncated' => :truncated, 'ErrCorrupt' => :corrupt, 'ErrNotKura' => :not_kura,
    'ErrUnknownSerializer' => :unknown_serializer, 'ErrUnknownCompressor' => :unknown_compressor,
    'ErrUnknownDictionary' => :unknown_dictionary, 'ErrTooLarge' => :too_large, 'ErrBomb' => :bomb,
    'ErrDeserialize' => :deserialize, 'ErrUnsupportedVersion' => :unsupported_version,
    'ErrNotUnderstood' => :not_understood
  }.freeze
end

module KuraTest
  # Private servers on free loopback ports, stopped at exit. Under
  # KURA_REQUIRE_SERVERS=1 (make test, CI) a missing server fails.
  module Servers
    @pids = []
    @parent = Process.pid

    # Servers start inside the tests, which minitest runs from its own
    # at_exit: stop them after the run (and at exit for scripts such as
    # the benchmarks), only in the process that started them.
    def self.stop_all
      return unless Process.pid == @parent

      @pids.each do |p|
        Process.kill('KILL', p)
        Process.wait(p)
      rescue SystemCallError
        nil
      end
      @pids.clear
    end
    Minitest.after_run { stop_all }
    at_exit { stop_all }

    def self.track(pid)
      @pids << pid
      pid
    end

    def self.free_port
      s = TCPServer.new('127.0.0.1', 0)
      port = s.addr[1]
      s.close
      port
    end

    def self.wait_port(port)
      200.times do
        TCPSocket.new('127.0.0.1', port).close
        return
      rescue SystemCallError
        sleep 0.02
      end
      raise "server on #{port} did not start"
    end

    def self.need(bin)
      return true if system("command -v #{bin} >/dev/null 2>&1")
      raise "#{bin} not installed (make servers installs it)" if ENV['KURA_REQUIRE_SERVERS'] == '1'

      false
    end

    # Starts a memcached; returns [addr, pid].
    def self.memcached
      need('memcached') or return nil
      port = free_port
      args = ['memcached', '-l', '127.0.0.1', '-p', port.to_s, '-U', '0', '-m', '64']
      args += ['-u', 'nobody'] if Process.uid.zero?
      pid = track(Process.spawn(*args, out: File::NULL, err: File::NULL))
      wait_port(port)
      ["127.0.0.1:#{port}", pid]
    end

    def self.redis
      need('redis-server') or return nil
      port = free_port
      pid = track(Process.spawn('redis-server', '--bind', '127.0.0.1', '--port', port.to_s, '--save', '', '--appendonly', 'no',
                                out: File::NULL, err: File::NULL))
      wait_port(port)
      ["127.0.0.1:#{port}", pid]
    end

    def self.stop(pid)
      Process.kill('TERM', pid)
      Process.wait(pid)
    rescue SystemCallError
      nil
    end
  end

  # The Go side of the cross-language tests (internal/harness/rbinterop).
  def self.go_helper = go_binary('rbinterop')

  # The Go side of the lease commands shared with the Node tests
  # (internal/harness/nodeinterop: stampede, invalidate, history).
  def self.node_interop = go_binary('nodeinterop')

  # internal/harness/<name>, built once per run into rb/.build (make
  # test-ruby builds both first and sets KURA_RB_PREBUILT=1).
  def self.go_binary(name)
    bin = File.join(ROOT, 'rb', '.build', name)
    return bin if ENV['KURA_RB_PREBUILT'] == '1' && File.exist?(bin)

    (@go_binaries ||= {})[name] ||= begin
      raise "go build ./internal/harness/#{name} failed" unless system('go', 'build', '-o', bin, "./internal/harness/#{name}", chdir: ROOT)

      bin
    end
  end
end
require 'socket'
