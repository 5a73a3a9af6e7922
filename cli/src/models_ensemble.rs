//! `stemflow models ensemble NAME --model a+b --ensemble ALG`: an ensemble saved as a route file
//! (`NAME.stemflow-route`, one ensemble stage) in the models folder, where the plugin's model
//! list offers it like any model.

use clap::Args;
use stemflow_engine::hybrid::{RouteFile, ROUTE_EXTENSION};
use stemflow_engine::SeparatorChoice;

use crate::error::CliError;
use crate::model_folders::InstallFolder;
use crate::model_spec::{EnsembleArgs, ModelSpec};

/// `stemflow models ensemble`'s arguments.
#[derive(Args)]
pub struct EnsembleRouteArgs {
    /// The ensemble's name (its file: NAME.stemflow-route).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// The models, `a+b+…` (names from the models folder, `builtin` or paths).
    #[arg(long, value_name = "A+B+…")]
    pub model: String,
    /// How their stems combine, and the weights.
    #[command(flatten)]
    pub ensemble: EnsembleArgs,
    #[command(flatten)]
    pub install: InstallFolder,
}

/// Runs `stemflow models ensemble`.
pub fn run(args: &EnsembleRouteArgs) -> Result<(), CliError> {
    let folder = args.install.folder()?;
    let name = args.name.trim();
    if name.is_empty() || name.contains(['/', '\\']) {
        return Err(CliError::Usage(format!(
            "`{name}` is not a name for a file: use letters, digits, spaces, - or _"
        )));
    }
    let ModelSpec::Ensemble(spec) =
        crate::model_spec::resolve(&args.model, &args.ensemble, &args.install.search_dirs())?
    else {
        return Err(CliError::Usage(format!(
            "an ensemble combines several models: --model {}+OTHER",
            args.model
        )));
    };
    let members: Vec<String> = spec
        .members
        .iter()
        .map(|choice| match choice {
            SeparatorChoice::Builtin => "builtin".to_owned(),
            // Models in the route's own folder by name, others by path.
            SeparatorChoice::Model(path) if path.parent() == Some(folder.as_path()) => {
                choice.display_name()
            }
            SeparatorChoice::Model(path) => path.display().to_string(),
        })
        .collect();
    let mut stage = serde_json::json!({
        "ensemble": members,
        "algorithm": spec.method.algorithm().name(),
    });
    if spec.method.is_weighted() {
        stage["weights"] = serde_json::json!(spec.method.weights());
    }
    let route = serde_json::json!({"name": name, "stages": [stage]});
    std::fs::create_dir_all(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    let path = folder.join(format!("{name}.{ROUTE_EXTENSION}"));
    if path.exists() && !args.install.force {
        return Err(CliError::Failed(format!(
            "{} exists; --force replaces it",
            path.display()
        )));
    }
    let partial = folder.join(format!(".{name}.{ROUTE_EXTENSION}.partial"));
    let text = serde_json::to_string_pretty(&route).expect("JSON values") + "\n";
    std::fs::write(&partial, text).map_err(|e| format!("{}: {e}", partial.display()))?;
    // The route must read back as written before it takes the name.
    if let Err(error) = RouteFile::read(&partial, &args.install.search_dirs()) {
        let _ = std::fs::remove_file(&partial);
        return Err(CliError::Failed(error.to_string()));
    }
    std::fs::rename(&partial, &path).map_err(|e| format!("{}: {e}", path.display()))?;
    let argument = if name.contains(char::is_whitespace) {
        format!("'{name}'")
    } else {
        name.to_owned()
    };
    crate::output::say!(
        "Wrote {} ({}): `stemflow separate --model {argument}`, or choose {name} in the plugin",
        path.display(),
        spec.label()
    );
    Ok(())
}
