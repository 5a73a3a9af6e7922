//! The model-folder options the subcommands share, each written once: `--models-dir` of the
//! commands that look models up by name, and `--models-dir`/`--force` of those that install a
//! model file.

use std::path::PathBuf;

use clap::Args;
use stemflow_engine::models_dirs;

use crate::error::CliError;

/// `--models-dir DIR` (repeatable) of a command that finds models by name.
#[derive(Args, Clone, Debug, Default)]
pub struct SearchFolders {
    /// Another folder to look for models in, besides the user models folder (repeatable).
    #[arg(long = "models-dir", value_name = "DIR")]
    pub extra: Vec<PathBuf>,
}

impl SearchFolders {
    /// Where a model's name is looked up: the user models folder, then the given folders
    /// ([`stemflow_engine::models_dirs`]).
    pub fn dirs(&self) -> Vec<PathBuf> {
        models_dirs(&self.extra)
    }
}

/// `--models-dir DIR` and `--force` of a command that installs a model file (or a route).
#[derive(Args, Clone, Debug, Default)]
pub struct InstallFolder {
    /// Where to put the model (default: the user models folder).
    #[arg(long = "models-dir", value_name = "DIR")]
    pub given: Option<PathBuf>,
    /// Replace a file of the same name that differs from the one being installed.
    #[arg(long)]
    pub force: bool,
}

impl InstallFolder {
    /// The folder to install into: `--models-dir`, or the user models folder.
    pub fn folder(&self) -> Result<PathBuf, CliError> {
        match &self.given {
            Some(dir) => Ok(dir.clone()),
            None => stemflow_paths::user_models_dir().ok_or_else(|| {
                CliError::Failed(
                    "no user models folder is known here (no home folder); pass --models-dir DIR"
                        .into(),
                )
            }),
        }
    }

    /// Where names the installed file refers to are looked up (a route's members): the user
    /// models folder and the install folder when given.
    pub fn search_dirs(&self) -> Vec<PathBuf> {
        models_dirs(self.given.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Search {
        #[command(flatten)]
        search: SearchFolders,
    }

    #[derive(Parser)]
    struct Install {
        #[command(flatten)]
        install: InstallFolder,
    }

    #[test]
    fn search_folders_repeat_after_the_user_models_folder() {
        let parsed = Search::parse_from(["x", "--models-dir", "/a", "--models-dir", "/b"]);
        let user = models_dirs(&[]);
        let dirs = parsed.search.dirs();
        assert_eq!(dirs[..user.len()], user[..]);
        assert_eq!(
            dirs[user.len()..],
            [PathBuf::from("/a"), PathBuf::from("/b")]
        );
    }

    #[test]
    fn an_install_folder_given_is_the_folder_and_searched_first() {
        let parsed = Install::parse_from(["x", "--models-dir", "/m", "--force"]);
        assert!(parsed.install.force);
        assert_eq!(parsed.install.folder().unwrap(), PathBuf::from("/m"));
        assert_eq!(
            parsed.install.search_dirs().last(),
            Some(&PathBuf::from("/m"))
        );
        let default = Install::parse_from(["x"]);
        assert!(!default.install.force);
        assert_eq!(default.install.search_dirs(), models_dirs(&[]));
    }
}
