// Checkpoints of sandboxes on the host's disk: a running VM's whole state (memory, devices),
// its disk as it was at that instant, and a copy of its workspace state, in
// $ABOX_HOME/checkpoints/<sandbox id>/<checkpoint id>/. Restoring one puts a sandbox back as it
// was, processes included; forks restore one into new sandboxes; pause keeps one and frees the
// VM. A checkpoint is written under a dot-name and renamed into place when complete, so one
// interrupted by a crash is never listed (and is removed at the next start).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/base/host_layout.h"
#include "src/runtime/sandbox.h"
#include "src/vmm/vmm.h"

namespace abox::daemon {

struct CheckpointInfo {
  std::string id;    // "ck" + 10 hex characters
  std::string name;  // the user's name, else the id
  std::string sandbox_id;
  std::string image;
  int cpus = 1;
  int memory_mib = 512;
  int64_t disk_mib = 0;  // the VM's disk (0: the rootfs's size, checkpoints from before --disk)
  // The frozen disks under the VM's own disk at the save (a golden template's, an earlier
  // checkpoint's), lowest first; a restore puts this checkpoint's disk on top of them.
  std::vector<std::string> disk_layers;
  bool workspace = false;  // a copy of the workspace state is kept
  bool pause = false;      // made by `abox pause` (resume removes it)
  absl::Time created_at;
  uint64_t bytes = 0;  // on the host's disk
  int64_t save_ms = 0;
  std::filesystem::path dir;

  [[nodiscard]] std::filesystem::path state() const { return dir / "state"; }
  [[nodiscard]] std::filesystem::path disk() const { return dir / "disk.qcow2"; }
  [[nodiscard]] std::filesystem::path workspace_dir() const { return dir / "workspace"; }
  // All the disk layers a VM restored from it runs on.
  [[nodiscard]] std::vector<std::string> layers_for_restore() const;
};

struct CheckpointRequest {
  std::string sandbox_id;
  std::string name;  // empty: the id
  std::string image;
  int cpus = 1;
  int memory_mib = 512;
  int64_t disk_mib = 0;
  // Made by `abox pause`: the VM stays paused after a good save (its owner destroys it next);
  // after a failed one it runs on, as for any checkpoint.
  bool pause = false;
  // Copies the sandbox's workspace state into this (new, empty) folder; null: no workspace.
  std::function<absl::Status(const std::filesystem::path& dir)> save_workspace;
};

// Thread-safe.
class CheckpointStore final {
 public:
  // `budget_bytes`: what all checkpoints together may take of the host's disk.
  CheckpointStore(vmm::Vmm& vmm, base::HostLayout layout, uint64_t budget_bytes);

  // Removes checkpoints a crash left half-written. Call once at start.
  void RemoveIncomplete();

  // Saves `vm` (running): pauses it, writes its state and a copy of its disk, copies the
  // workspace state, and lets it run again, whatever happened. A failed save leaves nothing.
  [[nodiscard]] absl::StatusOr<CheckpointInfo> Save(runtime::Sandbox& vm,
                                                    const std::vector<std::string>& vm_disk_layers,
                                                    const CheckpointRequest& request);

  // The checkpoints of a sandbox, oldest first.
  [[nodiscard]] std::vector<CheckpointInfo> List(const std::string& sandbox_id);
  // By id, name, or unique id prefix; kNotFound otherwise (naming what exists).
  [[nodiscard]] absl::StatusOr<CheckpointInfo> Find(const std::string& sandbox_id,
                                                    const std::string& ref);
  // Removes a checkpoint; kFailedPrecondition while a VM runs on its disk (a fork, or the
  // sandbox restored from it), naming them.
  [[nodiscard]] absl::Status Remove(const CheckpointInfo& checkpoint);
  // Removes every checkpoint of a removed sandbox that no VM depends on; those still in use are
  // removed by a later call (after their last dependent went). Returns how many went.
  int RemoveUnusedOf(const std::string& sandbox_id);
  // Checkpoints of sandboxes that are gone (not in `live_ids`) and unused: removed.
  int RemoveOrphans(const std::vector<std::string>& live_ids);

  // Bytes all checkpoints take.
  [[nodiscard]] uint64_t TotalBytes();

 private:
  // Sandbox ids whose VMs run on a disk in `dir`.
  std::vector<std::string> UsersOf(const std::filesystem::path& dir);
  std::filesystem::path Root() const { return layout_.home / "checkpoints"; }

  vmm::Vmm& vmm_;
  base::HostLayout layout_;
  uint64_t budget_bytes_;
  std::mutex mu_;  // one save or removal at a time
};

}  // namespace abox::daemon
