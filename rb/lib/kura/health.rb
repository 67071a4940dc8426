# frozen_string_literal: true

module Kura
  # Node health as the Go store keeps it (docs/health.md): after
  # `threshold` failures in a row a node is down, and its keys go straight
  # to the block (a miss, nothing written) instead of waiting for a
  # timeout each; one probe at a time per node, on a connection of its
  # own, every `interval` seconds, brings it back up. Reopened after fork.
  class Health
    attr_reader :threshold, :interval

    # prober: ->(node) { raises unless node answers } using its own connection.
    def initialize(prober, threshold: 3, interval: 0.5)
      raise ArgumentError, 'kura: health threshold must be at least 1' unless threshold.is_a?(Integer) && threshold >= 1
      raise ArgumentError, 'kura: health interval must be positive' unless interval.positive?

      @prober = prober
      @threshold = threshold
      @interval = interval
      @lock = Mutex.new
      reset!
    end

    def reset!
      @pid = Process.pid
      @fails = Hash.new(0)
      @down = {}
      @probes = {}
      @probes_sent = 0
    end

    def up?(node)
      check_fork
      !@down.key?(node)
    end

    def down_nodes
      check_fork
      @down.keys
    end

    # Probes sent since start (one in flight per down node at most).
    def probes_sent
      check_fork
      @lock.synchronize { @probes_sent }
    end

    def success(node)
      return if @fails[node].zero? && !@down.key?(node)

      @lock.synchronize { @fails[node] = 0 }
    end

    def failure(node)
      check_fork
      @lock.synchronize do
        @fails[node] += 1
        if @fails[node] >= @threshold && !@down.key?(node)
          @down[node] = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          start_probe(node)
        end
      end
    end

    def close
      @lock.synchronize do
        @probes.each_value(&:kill)
        @probes.clear
      end
    end

    private

    def check_fork
      return if @pid == Process.pid

      @lock = Mutex.new
      down = @down.keys
      reset!
      # A child inherits the parent's view but no threads: probe again.
      @lock.synchronize do
        down.each do |n|
          @down[n] = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          start_probe(n)
        end
      end
    end

    def start_probe(node)
      return if @probes[node]&.alive?

      @probes[node] = Thread.new do
        Thread.current.report_on_exception = false
        loop do
          sleep @interval
          @lock.synchronize { @probes_sent += 1 }
          ok = begin
            @prober.call(node)
            true
          rescue StandardError
            false
          end
          next unless ok

          @lock.synchronize do
            @down.delete(node)
            @fails[node] = 0
            @probes.delete(node)
          end
          break
        end
      end
    end
  end
end
