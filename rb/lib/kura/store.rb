# frozen_string_literal: true

require_relative 'errors'
require_relative 'health'

module Kura
  # The store seam (the Node package's Store, Go's store.Store in
  # byte-level, node-grouped form). Every batch method takes
  # {node => [...]} and returns {node => results | Kura::StoreError}: one
  # round trip per server, all servers at once where the client allows.
  # A node the breaker holds down answers StoreError at once.
  class Store
    attr_reader :health

    def node_of(key)
      raise NotImplementedError
    end

    def nodes
      raise NotImplementedError
    end

    # Groups keys by owner: {node => [index, ...]}.
    def group(keys)
      out = {}
      keys.each_with_index { |k, i| (out[node_of(k)] ||= []) << i }
      out
    end

    def close
      @health&.close
    end

    protected

    def setup_health(health)
      @health = case health
                when false, nil then nil
                when Hash then Health.new(method(:probe), **health)
                else Health.new(method(:probe))
                end
    end

    # The groups whose node is up; a down node's answer (StoreError) goes in out.
    def up_groups(groups, out)
      return groups unless @health

      groups.reject do |node, _|
        next false if @health.up?(node)

        out[node] = down_error(node)
        true
      end
    end

    def down_error(node)
      StoreError.new(node, 'down (health breaker open); keys go to the block')
    end
  end
end
